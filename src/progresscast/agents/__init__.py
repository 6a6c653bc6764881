"""Inputs from agents: sinks, the MCP server, hooks, A2A."""
