"""Shared machinery: operands, streams, memory, lifecycle, options, errors, logging, cache."""
