"""Verifies a Vestibule entry token with PyJWT, the way a storefront in Python would.

Usage: verify_entry_token.py JWKS_URL TOKEN ROOM ISSUER AUDIENCE

Fetches the key set (PyJWKClient picks the key by the token's `kid`), verifies the real token
(EdDSA signature, exp, iss, aud, the required claims, then the `room` claim), and tries three
tokens that must be refused: the real one with its claims changed (tampered), the same claims
signed by another Ed25519 key under the same `kid`, and the real one checked for another
audience. Prints one JSON object: the verified claims, the kid, and the name of the error
each bad token raised (null if it was wrongly accepted). Run by tests/tests/entry_tokens.rs.
"""

import base64
import json
import sys

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

jwks_url, token, room, issuer, audience = sys.argv[1:6]

REQUIRED = ["exp", "iat", "iss", "aud", "sub", "jti"]
signing_key = jwt.PyJWKClient(jwks_url).get_signing_key_from_jwt(token)


def verify(candidate, aud=audience):
    return jwt.decode(
        candidate,
        signing_key.key,
        algorithms=["EdDSA"],
        audience=aud,
        issuer=issuer,
        options={"require": REQUIRED},
    )


def refused(candidate, aud=audience):
    try:
        verify(candidate, aud)
    except jwt.InvalidTokenError as error:
        return type(error).__name__
    return None


claims = verify(token)
if claims["room"] != room:
    raise SystemExit(f"token is for room {claims['room']!r}, not {room!r}")


def b64decode(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def b64encode(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


header, payload, signature = token.split(".")
changed = json.loads(b64decode(payload))
changed["exp"] += 3600
tampered = ".".join([header, b64encode(json.dumps(changed).encode()), signature])

stranger = Ed25519PrivateKey.generate()
foreign = jwt.encode(claims, stranger, algorithm="EdDSA", headers={"kid": signing_key.key_id})

print(
    json.dumps(
        {
            "claims": claims,
            "kid": signing_key.key_id,
            "tampered": refused(tampered),
            "foreign": refused(foreign),
            "otherAudience": refused(token, aud="someone-else"),
        }
    )
)
