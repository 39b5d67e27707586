"""Certificates and keys of a devcluster, made with ``cryptography``.

One ECDSA P-256 CA signs the apiserver's serving certificate (also used by the scheduler and
the controller manager), the real node's registry's, and the client certificates of the admin,
the scheduler and the controller manager; an RSA key pair signs service-account tokens. Every
``up`` makes a new set.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .constants import LOOPBACK, SERVICE_CLUSTER_FIRST_IP

VALIDITY = datetime.timedelta(days=365)
BACKDATE = datetime.timedelta(minutes=5)
SERVING_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
CLIENTS = {
    "admin": ("devcluster-admin", "system:masters"),
    "scheduler": ("system:kube-scheduler", None),
    "controller-manager": ("system:kube-controller-manager", None),
    # The real node's kubelet, authorized by the API server's Node authorizer.
    "node": ("system:node:devcluster-node", "system:nodes"),
    # The second node's kubelet (realnode.SECOND_NODE_NAME), when the cluster has one.
    "node-2": ("system:node:devcluster-node-2", "system:nodes"),
    # kube-proxy on the real node (the bootstrap binding system:node-proxier names this user).
    "proxy": ("system:kube-proxy", None),
}


@dataclass(frozen=True)
class Pki:
    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    def read(self, name: str) -> bytes:
        return self.path(name).read_bytes()


def _write(path: Path, data: bytes, private: bool) -> None:
    path.write_bytes(data)
    os.chmod(path, 0o600 if private else 0o644)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


@dataclass(frozen=True)
class Authority:
    """A CA and the certificates it signs, in the shape strict X.509 verification asks for
    (Python 3.13's default contexts set ``VERIFY_X509_STRICT``): key identifiers on the CA and
    on every certificate it issues, key usage on both."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, common_name: str) -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = name(common_name)
        cert = (
            _builder(subject, subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_key_usage(ca=True), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.key)

    def issue(
        self, subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName] | None = None
    ) -> tuple[bytes, bytes]:
        """A certificate for ``usage`` (server or client auth) and its key, both PEM."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _builder(subject, self.cert.subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def generate(directory: Path, extra_ips: tuple[str, ...] = ()) -> Pki:
    """``extra_ips``: more addresses the API server is reached on (the real node's IP, when pods
    reach the API server)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = Authority.create("devcluster-ca")
    _write(directory / "ca.crt", ca.cert_pem, private=False)
    _write(directory / "ca.key", ca.key_pem, private=True)

    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address(LOOPBACK)),
        x509.IPAddress(ipaddress.ip_address(SERVICE_CLUSTER_FIRST_IP)),
        *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in extra_ips),
        *(x509.DNSName(dns) for dns in SERVING_DNS),
    ]
    crt, key = ca.issue(name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans)
    _write(directory / "serving.crt", crt, private=False)
    _write(directory / "serving.key", key, private=True)

    # The real node's registry (devcluster/registry.py), reached as localhost or 127.0.0.1.
    registry_sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address(LOOPBACK)),
        x509.DNSName("localhost"),
    ]
    crt, key = ca.issue(name("devcluster-registry"), ExtendedKeyUsageOID.SERVER_AUTH, registry_sans)
    _write(directory / "registry.crt", crt, private=False)
    _write(directory / "registry.key", key, private=True)

    for filename, (common_name, organization) in CLIENTS.items():
        crt, key = ca.issue(name(common_name, organization), ExtendedKeyUsageOID.CLIENT_AUTH)
        _write(directory / f"{filename}.crt", crt, private=False)
        _write(directory / f"{filename}.key", key, private=True)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(directory / "sa.key", _key_pem(sa_key), private=True)
    sa_pub = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write(directory / "sa.pub", sa_pub, private=False)
    return Pki(directory)
