"""HTTP hardening at the door: body limits, connection guards, trusted hosts, request ids, draining."""
