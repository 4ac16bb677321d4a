"""cuweave's test suite."""
