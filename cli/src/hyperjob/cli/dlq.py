"""``hyperjob get dlq`` and ``hyperjob dlq replay|purge``: what could not be handled, and what to
do about it once the cause is fixed (the logic is ``bus.deadletters``).

``get dlq`` lists every letter (``-o json`` for scripts): the consumer that gave up, the original
subject, the reason (``undecodable``, ``malformed``, ``unknown-type``, ``max_deliver``,
``handler-failed``, ...), the error, where the original is stored (``STREAM/SEQ``; ``*`` marks a
letter by reference) and its age. ``dlq replay`` puts the chosen letters' messages back on their
subjects and removes the letters (one effect each, however often it runs); ``dlq purge`` removes
them. Both take ``--consumer`` and ``--seq``; ``purge`` with neither needs ``--all``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from hyperjob.bus import deadletters
from hyperjob.bus.deadletters import DeadLetter, DeadLetterError
from hyperjob.events.access import OPERATOR

from . import views
from .client import Client, connect
from .config import resolve_endpoints

R = TypeVar("R")

__all__ = ["KIND", "dlq"]


def _row(letter: DeadLetter) -> views.View:
    row = {k: getattr(letter, k) for k in letter.__struct_fields__}
    row["name"] = str(letter.seq)
    return row


async def _load(client: Client, name: str | None) -> list[views.View]:
    seq = _seq(name) if name else None
    return [_row(letter) for letter in await deadletters.dead_letters(client.bus, seq=seq)]


def _seq(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise click.UsageError(f"a dead letter is named by its DLQ sequence number, not {text!r}") from None


def _age(at: float) -> str:
    seconds = max(0, int(time.time() - at))
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m" if seconds < 7200 else f"{seconds // 3600}h"


def _rows(items: list[views.View], wide: bool) -> tuple[list[str], list[list[str]]]:
    header = ["SEQ", "CONSUMER", "SUBJECT", "REASON", "ERROR", "STREAM/SEQ", "AGE"]
    if wide:
        header += ["DELIVERIES", "SIZE", "MSG-ID"]
    rows = []
    for i in items:
        consumer = f"{i['consumer']} (watch)" if i["watch"] else i["consumer"]
        where = f"{i['stream']}/{i['original_seq']}{'*' if i['by_reference'] else ''}"
        error = i["error"] if wide or len(i["error"]) <= 60 else i["error"][:57] + "..."
        row = [i["name"], consumer, i["subject"], i["reason"], error, where, _age(i["at"])]
        if wide:
            row += [str(i["deliveries"]), str(i["size"]), i["msg_id"] or "-"]
        rows.append(row)
    return header, rows


KIND = views.Kind("deadletters", "deadletter", _rows, _load, aliases=("dlq",))


def _run(work: Callable[[Client], Awaitable[R]]) -> R:
    async def run() -> R:
        client = await connect(resolve_endpoints(as_user=OPERATOR))  # replaying and purging are the operator's
        try:
            return await work(client)
        finally:
            await client.close()

    return asyncio.run(run())


@click.group()
def dlq() -> None:
    """Act on the dead-letter queue (list it with `hyperjob get dlq`)."""


_consumer = click.option("--consumer", default=None, help="only this consumer's letters (the CONSUMER column)")
_seq_option = click.option("--seq", type=int, default=None, help="only the letter with this DLQ sequence (SEQ)")


@dlq.command()
@_consumer
@_seq_option
def replay(consumer: str | None, seq: int | None) -> None:
    """Put the letters' messages back on their subjects, then remove the letters."""

    async def work(client: Client) -> int:
        letters = await deadletters.dead_letters(client.bus, consumer=consumer, seq=seq)
        failed = 0
        for letter in letters:
            try:
                await deadletters.replay(client.bus, letter)
            except DeadLetterError as exc:
                click.echo(f"error: {exc}", err=True)
                failed += 1
                continue
            click.echo(f"deadletter/{letter.seq} replayed to {letter.subject}")
        if not letters:
            click.echo("No dead letters found.", err=True)
        return failed

    if _run(work):
        raise SystemExit(1)


@dlq.command()
@_consumer
@_seq_option
@click.option("--all", "everything", is_flag=True, help="every letter (needed when no --consumer or --seq)")
def purge(consumer: str | None, seq: int | None, everything: bool) -> None:
    """Remove the letters without replaying them."""
    if consumer is None and seq is None and not everything:
        raise click.UsageError("say which letters: --consumer, --seq, or --all")

    async def work(client: Client) -> None:
        letters = await deadletters.dead_letters(client.bus, consumer=consumer, seq=seq)
        for letter in letters:
            if await deadletters.purge(client.bus, letter):
                click.echo(f"deadletter/{letter.seq} purged")
        if not letters:
            click.echo("No dead letters found.", err=True)

    _run(work)
