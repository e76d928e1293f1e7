import msgspec


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """``APISERVER_HOST``/``_PORT``: where it listens (loopback by default); ``_CREDENTIALS``: the
    credentials file whose identities' passwords are the bearer tokens; ``_TLS_CERT``/``_TLS_KEY``:
    serve HTTPS with them (plain HTTP when unset); ``_POD_LOGS``: where the node-agents of this
    machine keep their pods' logs (``NODE_AGENT_WORK_DIR``), which ``pods/log`` serves."""

    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    host: str = "127.0.0.1"
    port: int = 6443
    credentials: str = ".hyperjob/credentials.json"
    tls_cert: str = ""
    tls_key: str = ""
    pod_logs: str = ""
    log_level: str = "INFO"
