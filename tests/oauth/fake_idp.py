#!/usr/bin/env python3
"""A FAKE OpenID Connect provider for Sluice's OAUTHBEARER tests (started by
`tests/kafka/broker.sh start-auth`). It exists because no real identity provider can run here; the
broker that validates its tokens is the real Kafka broker (OAuthBearerValidatorCallbackHandler).

At start it generates a fresh RSA key (never written to disk), then serves:

  GET  http://HOST:JWKS_PORT/jwks      the JWKS with that key's public half (kid "sluice-test")
  POST https://HOST:TOKEN_PORT/token   the OAuth 2 client-credentials grant (RFC 6749 4.4):
                                       client id and secret in HTTP Basic auth (or the form),
                                       answer {"access_token", "token_type", "expires_in"}
  GET  https://HOST:TOKEN_PORT/stats   {"issued": {client_id: count}}, for the tests

Clients (secret "<client id>-secret" for each); each issues RS256 JWTs with iss ISSUER, sub
the client id, scope from the request:
  sluice-good       aud "sluice-kafka", valid 1 hour
  sluice-short      aud "sluice-kafka", valid 12 s (forces fresh tokens on re-authentication)
  sluice-expired    aud "sluice-kafka", expired 10 minutes ago, but answered with expires_in 3600
                    (an issuer whose clock is off): the client passes it on, the broker must refuse it
  sluice-wrong-aud  aud "someone-else"
  sluice-bad-sig    signed with another key that claims the same kid
Anything else, or a wrong secret: 401 {"error": "invalid_client"}.

Usage: fake_idp.py HOST JWKS_PORT TOKEN_PORT CERT_PEM KEY_PEM
"""

import base64
import http.server
import json
import ssl
import sys
import threading
import time
import urllib.parse

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

KID = "sluice-test"
AUDIENCE = "sluice-kafka"

HOST, JWKS_PORT, TOKEN_PORT, CERT_PEM, KEY_PEM = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
ISSUER = f"https://{HOST}:{TOKEN_PORT}"

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ISSUED = {}
LOCK = threading.Lock()

CLIENTS = {
    "sluice-good": {"aud": AUDIENCE, "lifetime": 3600, "key": KEY},
    "sluice-short": {"aud": AUDIENCE, "lifetime": 12, "key": KEY},
    "sluice-expired": {"aud": AUDIENCE, "lifetime": -600, "key": KEY},
    "sluice-wrong-aud": {"aud": "someone-else", "lifetime": 3600, "key": KEY},
    "sluice-bad-sig": {"aud": AUDIENCE, "lifetime": 3600, "key": OTHER_KEY},
}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def uint(value: int) -> str:
    return b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def jwt(client_id: str, scope: str) -> (str, int):
    client = CLIENTS[client_id]
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": KID}
    claims = {"iss": ISSUER, "sub": client_id, "aud": client["aud"], "iat": now, "nbf": now - 60 if client["lifetime"] > 0 else now - 1200, "exp": now + client["lifetime"], "scope": scope}
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    signature = client["key"].sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}", client["lifetime"]


def jwks() -> bytes:
    numbers = KEY.public_key().public_numbers()
    key = {"kty": "RSA", "kid": KID, "use": "sig", "alg": "RS256", "n": uint(numbers.n), "e": uint(numbers.e)}
    return json.dumps({"keys": [key]}).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("fake_idp: " + (fmt % args) + "\n")

    def answer(self, status: int, body: dict | bytes):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/jwks":
            self.answer(200, jwks())
        elif path == "/stats":
            with LOCK:
                self.answer(200, {"issued": dict(ISSUED)})
        else:
            self.answer(404, {"error": "not_found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
        if urllib.parse.urlsplit(self.path).path != "/token":
            return self.answer(404, {"error": "not_found"})
        if form.get("grant_type", [""])[0] != "client_credentials":
            return self.answer(400, {"error": "unsupported_grant_type"})
        client_id = form.get("client_id", [""])[0]
        secret = form.get("client_secret", [""])[0]
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            try:
                client_id, secret = base64.b64decode(auth[6:]).decode().split(":", 1)
            except Exception:
                return self.answer(400, {"error": "invalid_request", "error_description": "bad Basic header"})
        if client_id not in CLIENTS or secret != f"{client_id}-secret":
            return self.answer(401, {"error": "invalid_client", "error_description": "unknown client or wrong secret"})
        token, lifetime = jwt(client_id, form.get("scope", [""])[0])
        with LOCK:
            ISSUED[client_id] = ISSUED.get(client_id, 0) + 1
        body = {"access_token": token, "token_type": "Bearer", "expires_in": lifetime if lifetime > 0 else 3600}
        self.answer(200, body)


def serve(server):
    server.serve_forever()


def main():
    jwks_server = http.server.ThreadingHTTPServer((HOST, JWKS_PORT), Handler)
    token_server = http.server.ThreadingHTTPServer((HOST, TOKEN_PORT), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERT_PEM, KEY_PEM)
    token_server.socket = context.wrap_socket(token_server.socket, server_side=True)
    threading.Thread(target=serve, args=(jwks_server,), daemon=True).start()
    sys.stderr.write(f"fake_idp: JWKS on http://{HOST}:{JWKS_PORT}/jwks, tokens on {ISSUER}/token\n")
    serve(token_server)


if __name__ == "__main__":
    main()
