"""rota's HTTP client: where the server is (``credentials``) and how to talk to it (``http``).

The CLI never touches the store: every command goes through ``Client`` to the API.
"""

from rota.client.credentials import Credentials, credentials_path, discover, save
from rota.client.http import ApiError, Client, ConnectionLost, Unreachable

__all__ = ["ApiError", "Client", "ConnectionLost", "Credentials", "Unreachable",
           "credentials_path", "discover", "save"]
