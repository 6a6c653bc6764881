"""Following A2A agents (the `progress/v1` extension): mapping, applying in order,
and the ways updates come in — JSON lines, a followed stream, push notifications,
and the agents `serve` follows."""
