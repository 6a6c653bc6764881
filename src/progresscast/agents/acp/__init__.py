"""`progresscast acp`: a transparent Agent Client Protocol proxy (docs/agents.md).

`proxy.py` is the entry: it runs the agent and passes every message both ways;
`card.py` turns what it observes into card writes, off the forwarding path.
"""
