"""Certificates for the local cluster, made with the ``cryptography`` package.

One CA signs: the kube-apiserver serving cert, an admin client cert (group ``system:masters``),
and one serving cert per webhook server on 127.0.0.1 (Kueue, JobSet, later kueue-tas).
A separate RSA key signs service-account tokens.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=365)
_API_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class Pki:
    """Paths of every PEM file the cluster uses."""

    dir: Path

    @property
    def ca_crt(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def apiserver_crt(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def admin_crt(self) -> Path:
        return self.dir / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.dir / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    def serving_dir(self, name: str) -> Path:
        """Directory holding ``tls.crt``/``tls.key`` for a webhook server (controller-runtime layout)."""
        return self.dir / name


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _make_ca() -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    name = _name("kueue-tas-e2e-ca")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _make_leaf(
    ca_cert: x509.Certificate,
    ca_key: rsa.RSAPrivateKey,
    cn: str,
    *,
    org: str | None = None,
    server: bool = False,
    client: bool = False,
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, org))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def generate(pki_dir: Path, webhook_servers: tuple[str, ...]) -> Pki:
    """Create a fresh PKI in ``pki_dir``; one serving cert dir per name in ``webhook_servers``."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    pki = Pki(pki_dir)
    ca_cert, ca_key = _make_ca()
    _write_cert(ca_cert, pki.ca_crt)
    _write_key(ca_key, pki.ca_key)

    cert, key = _make_leaf(ca_cert, ca_key, "kube-apiserver", server=True, dns=_API_DNS, ips=("127.0.0.1", "10.0.0.1"))
    _write_cert(cert, pki.apiserver_crt)
    _write_key(key, pki.apiserver_key)

    cert, key = _make_leaf(ca_cert, ca_key, "e2e-admin", org="system:masters", client=True)
    _write_cert(cert, pki.admin_crt)
    _write_key(key, pki.admin_key)

    sa = _new_key()
    _write_key(sa, pki.sa_key)
    pki.sa_pub.write_bytes(
        sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )

    for name in webhook_servers:
        write_serving_cert(pki, name)
    return pki


def write_serving_cert(pki: Pki, name: str) -> Path:
    """Write ``<pki>/<name>/tls.{crt,key}`` valid for 127.0.0.1 and localhost; return the dir."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca_crt.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, rsa.RSAPrivateKey)
    cert, key = _make_leaf(ca_cert, ca_key, f"{name}-webhook", server=True, dns=("localhost",), ips=("127.0.0.1",))
    d = pki.serving_dir(name)
    d.mkdir(parents=True, exist_ok=True)
    _write_cert(cert, d / "tls.crt")
    _write_key(key, d / "tls.key")
    return d
