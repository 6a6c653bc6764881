"""What every server of ours shares, low in the house: reading a bounded body, errors
mapped to responses once, tokens and their scopes, and a listening socket bounded in time
and number (`server`). The gateway, the platforms' own routes and the MCP server over
HTTP build on it; it imports none of them."""
