"""Authentication: how the broker establishes who a client is."""
