"""RSA key pairs for the ssh job plugin, in pure Python (``cryptography`` is not a dependency).

``generate_rsa_keypair(rng)`` draws from whatever ``random.Random`` it is given: the core stays
pure and tests stay deterministic. ``deterministic_keygen(seed)`` seeds it from the job uid, which
is what the simulator wants; a live service should pass ``keygen=lambda _: generate_rsa_keypair(
random.SystemRandom())`` to ``admit`` so the private key is not derivable from the uid.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import math
import random

from .model import SshKeyPair

PUBLIC_EXPONENT = 65537
_SMALL_PRIMES = [p for p in range(3, 2000) if all(p % d for d in range(2, int(p**0.5) + 1))]


def deterministic_keygen(seed: str) -> SshKeyPair:
    """An RSA-2048 pair that depends only on ``seed`` (the same uid always gives the same key)."""
    return _cached_keypair(seed)


@functools.lru_cache(maxsize=64)
def _cached_keypair(seed: str) -> SshKeyPair:
    # Cached because generating primes in pure Python takes a fraction of a second; the result is a
    # pure function of the seed, so caching cannot change behaviour.
    return generate_rsa_keypair(random.Random(hashlib.sha256(seed.encode()).digest()))


def generate_rsa_keypair(rng: random.Random, bits: int = 2048) -> SshKeyPair:
    """A PKCS#1 PEM private key and its OpenSSH public key line, as Volcano's ssh plugin writes them."""
    while True:
        p = _random_prime(rng, bits // 2)
        q = _random_prime(rng, bits - bits // 2)
        if p != q and (p * q).bit_length() == bits:
            break
    n = p * q
    lam = math.lcm(p - 1, q - 1)
    d = pow(PUBLIC_EXPONENT, -1, lam)
    fields = [0, n, PUBLIC_EXPONENT, d, p, q, d % (p - 1), d % (q - 1), pow(q, -1, p)]
    der = _der_sequence(b"".join(_der_integer(v) for v in fields))
    body = base64.b64encode(der).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    private = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----\n"
    blob = _ssh_string(b"ssh-rsa") + _ssh_mpint(PUBLIC_EXPONENT) + _ssh_mpint(n)
    public = "ssh-rsa " + base64.b64encode(blob).decode() + "\n"
    return SshKeyPair(private_key=private, public_key=public)


def _random_prime(rng: random.Random, bits: int) -> int:
    while True:
        # Top two bits set so that p*q has exactly 2*bits bits; odd, and coprime to e.
        candidate = rng.getrandbits(bits) | (3 << (bits - 2)) | 1
        if any(candidate % sp == 0 for sp in _SMALL_PRIMES):
            continue
        if (candidate - 1) % PUBLIC_EXPONENT == 0:
            continue
        if _is_probable_prime(candidate, rng):
            return candidate


def _is_probable_prime(n: int, rng: random.Random, rounds: int = 40) -> bool:
    """Miller–Rabin; bases come from ``rng`` so the whole generation is reproducible."""
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for _ in range(rounds):
        x = pow(rng.randrange(2, n - 2), d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def _der_length(length: int) -> bytes:
    if length < 0x80:
        return bytes([length])
    raw = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def _der_integer(value: int) -> bytes:
    raw = value.to_bytes(value.bit_length() // 8 + 1, "big")  # one spare byte keeps the sign bit clear
    while len(raw) > 1 and raw[0] == 0 and raw[1] < 0x80:
        raw = raw[1:]
    return b"\x02" + _der_length(len(raw)) + raw


def _der_sequence(content: bytes) -> bytes:
    return b"\x30" + _der_length(len(content)) + content


def _ssh_string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _ssh_mpint(value: int) -> bytes:
    raw = value.to_bytes(value.bit_length() // 8 + 1, "big")
    if len(raw) > 1 and raw[0] == 0 and raw[1] < 0x80:
        raw = raw[1:]
    return _ssh_string(raw)
