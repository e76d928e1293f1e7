"""The one exception of the core: a conf that cannot be used. Rejections are values, not errors."""


class ConfError(ValueError):
    """A scheduler conf that cannot be used; the message names the offending key."""
