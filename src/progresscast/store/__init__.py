"""Redis: key names, shards, the card store (the one write path), events, lease, connections, the embedded server."""
