"""brain's version, for the API's OpenAPI document, the CLI's --version, MCP and PAM exports (``brain.__version__``)."""

__version__ = "0.1.0"
