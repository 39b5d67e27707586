"""The devcluster's certificates pass strict X.509 verification, which Python 3.13 turns on in
every default context: without key identifiers no client on 3.13 (the tests, the operators)
could reach the devcluster's kube-apiserver."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from devcluster import pki


def _strict_client(keys: pki.Pki, client_cert: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=keys.path("ca.crt"))
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    if client_cert:
        context.load_cert_chain(keys.path(f"{client_cert}.crt"), keys.path(f"{client_cert}.key"))
    return context


def _strict_server(keys: pki.Pki, stem: str = "serving") -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=keys.path("ca.crt"))
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(keys.path(f"{stem}.crt"), keys.path(f"{stem}.key"))
    return context


def _handshake(client: ssl.SSLContext, server: ssl.SSLContext, server_name: str) -> None:
    """A TLS handshake through memory buffers: both sides verify the other's certificate."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_end = client.wrap_bio(to_client, to_server, server_hostname=server_name)
    server_end = server.wrap_bio(to_server, to_client, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for side, end in (("client", client_end), ("server", server_end)):
            if done[side]:
                continue
            try:
                end.do_handshake()
                done[side] = True
            except ssl.SSLWantReadError:
                pass
        if all(done.values()):
            return
    raise AssertionError(f"handshake did not finish: {done}")


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> pki.Pki:
    return pki.generate(Path(tmp_path_factory.mktemp("pki")))


@pytest.mark.parametrize("client_cert", sorted(pki.CLIENTS))
@pytest.mark.parametrize("server_name", ["127.0.0.1", "localhost", "kubernetes.default.svc"])
def test_mutual_tls_passes_strict_verification(keys: pki.Pki, client_cert: str, server_name: str) -> None:
    _handshake(_strict_client(keys, client_cert), _strict_server(keys), server_name)


@pytest.mark.parametrize("server_name", ["127.0.0.1", "localhost"])
def test_the_registry_certificate_passes_strict_verification(keys: pki.Pki, server_name: str) -> None:
    """What skopeo, helm and containerd check when they reach the real node's registry (its
    clients present no certificate; the server side here asks for one anyway)."""
    _handshake(_strict_client(keys, "admin"), _strict_server(keys, "registry"), server_name)


def test_a_certificate_without_key_identifiers_is_refused_by_strict_verification(tmp_path: Path) -> None:
    """The check above can fail: the same handshake with the shape the certificates had before."""
    ca = pki.Authority.create("no-identifiers-ca")
    key = ec.generate_private_key(ec.SECP256R1())
    bare = (
        x509.CertificateBuilder()
        .subject_name(pki.name("kube-apiserver"))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(ca.cert.not_valid_before_utc)
        .not_valid_after(ca.cert.not_valid_after_utc)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    (tmp_path / "serving.crt").write_bytes(bare.public_bytes(serialization.Encoding.PEM))
    pkcs8 = serialization.PrivateFormat.PKCS8
    (tmp_path / "serving.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, pkcs8, serialization.NoEncryption())
    )
    keys = pki.Pki(tmp_path)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(keys.path("serving.crt"), keys.path("serving.key"))
    with pytest.raises(ssl.SSLCertVerificationError, match="Authority Key Identifier"):
        _handshake(_strict_client(keys), server, "localhost")
