"""What the server tells its operators: Prometheus metrics, one log line per request, periodic engine stats."""
