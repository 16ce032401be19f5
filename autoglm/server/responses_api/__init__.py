"""OpenAI's Responses API: a request translated into a chat request, its reply in the Response shapes, and
the responses a tenant keeps for later turns."""
