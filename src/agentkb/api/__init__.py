"""HTTP only: parse the request, call one service, encode the answer."""
