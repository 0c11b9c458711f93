"""`make soak`: the console under steady load for a bounded time, then checked (docs/soak.md)."""
