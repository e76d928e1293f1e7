"""placeholder: RedisStore and InMemoryStore land next."""
