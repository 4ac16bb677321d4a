"""Package-neutral machinery: array records, one adapter per array package, stream-ordered
resources, streams, memory, staging, lifecycle, options, errors, logging, plan cache."""
