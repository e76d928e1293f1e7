"""Built-in plugins, one module each; ``schedcore.registry.build_registry`` lists them."""
