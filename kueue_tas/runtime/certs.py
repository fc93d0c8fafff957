"""TLS serving certificates (the admission webhook's, the metrics and topology map servers'):
issued by the controller itself (a private CA and one serving certificate, with
``cryptography``), or read from files another issuer (cert-manager) keeps current.

Pure apart from ``ssl_context``, which must go through files: Python's ``ssl`` loads a
certificate chain only from a path.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# A year, renewed a month before it ends: a replica checks every few minutes, so a renewal is
# never missed, and a stolen key is useful for a bounded time.
VALIDITY = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=30)
# The client's clock may be behind ours.
BACKDATE = dt.timedelta(hours=1)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_FILE = "ca.crt"
# The CA a renewal replaced, kept beside ca.crt (which stays the one CA that signs tls.crt, as
# cert-manager lays it out) so that both can be trusted while replicas move to the new leaf.
PREVIOUS_CA_FILE = "ca-previous.crt"


class CertificateError(ValueError):
    """Certificate material that cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class ServingCert:
    """PEM bytes: the CA that signs (what the apiserver trusts), the serving certificate, its key;
    and the CA this one replaced at its renewal (empty for a first issue)."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    previous_ca_pem: bytes = b""


def service_hosts(service: str, namespace: str, extra: Sequence[str] = ()) -> list[str]:
    """The names the apiserver may dial the Service by, then ``extra`` (e.g. ``127.0.0.1``)."""
    svc = f"{service}.{namespace}.svc"
    names = [service, f"{service}.{namespace}", svc, f"{svc}.cluster.local"]
    return list(dict.fromkeys([*names, *extra]))


def _subject_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for host in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            out.append(x509.DNSName(host))
    return out


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def issue(hosts: Sequence[str], now: dt.datetime, *, ca_common_name: str = "kueue-tas-webhook-ca") -> ServingCert:
    """A new CA and a serving certificate for ``hosts`` signed by it (P-256 keys)."""
    if not hosts:
        raise CertificateError("a serving certificate needs at least one host name")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(ca_common_name)
    start, end = now - BACKDATE, now + VALIDITY
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # keyCertSign, cRLSign
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(_subject_names(hosts)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCert(
        ca_pem=ca.public_bytes(serialization.Encoding.PEM),
        cert_pem=leaf.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def renewal_reason(cert: ServingCert, hosts: Sequence[str], now: dt.datetime) -> str | None:
    """Why ``cert`` must be replaced (unreadable, not signed by its CA, ending within
    ``RENEW_BEFORE``, a host it does not name, a key that is not its own), or None."""
    try:
        ca = x509.load_pem_x509_certificate(cert.ca_pem)
        leaf = x509.load_pem_x509_certificate(cert.cert_pem)
        key = serialization.load_pem_private_key(cert.key_pem, password=None)
    except ValueError as exc:
        return f"unreadable: {exc}"
    if leaf.public_key() != key.public_key():
        return "the key is not the certificate's"
    try:
        leaf.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as exc:
        return f"not signed by its CA: {exc or type(exc).__name__}"
    ends = min(leaf.not_valid_after_utc, ca.not_valid_after_utc)
    if ends - now < RENEW_BEFORE:
        return f"ends {ends.isoformat()}"
    try:
        named = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "names no host"
    missing = [h for h in hosts if not any(n == g for g in _subject_names([h]) for n in named)]
    return f"does not name {', '.join(missing)}" if missing else None


def trust_bundle(cert: ServingCert, now: dt.datetime, keep_previous: dt.timedelta) -> bytes:
    """The CAs a client must trust at ``now``: ``cert``'s, and for ``keep_previous`` after
    ``cert`` was issued also the previous one (while it is valid), since a replica that has not
    reloaded yet still serves a leaf that CA signed."""
    try:
        leaf = x509.load_pem_x509_certificate(cert.cert_pem)
        previous = x509.load_pem_x509_certificate(cert.previous_ca_pem) if cert.previous_ca_pem else None
    except ValueError:
        return cert.ca_pem
    issued = leaf.not_valid_before_utc + BACKDATE
    if previous is None or now >= issued + keep_previous or now >= previous.not_valid_after_utc:
        return cert.ca_pem
    return cert.ca_pem.rstrip(b"\n") + b"\n" + cert.previous_ca_pem


def read_files(directory: Path, setting: str = "webhook_cert_dir") -> tuple[bytes, bytes]:
    """(certificate chain, key) PEM from ``directory``; CertificateError naming the setting and
    what is missing."""
    try:
        return (directory / CERT_FILE).read_bytes(), (directory / KEY_FILE).read_bytes()
    except OSError as exc:
        raise CertificateError(f"{setting} {str(directory)!r}: {exc.strerror or exc}: {exc.filename}") from exc


def files_version(directory: Path) -> tuple[float, ...]:
    """Changes when either file does (a mounted Secret is swapped by symlink, so stat follows it)."""
    out: list[float] = []
    for name in (CERT_FILE, KEY_FILE):
        try:
            st = (directory / name).stat()
            out.extend((st.st_mtime, float(st.st_ino), float(st.st_size)))
        except OSError:
            out.append(-1.0)
    return tuple(out)


def ssl_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A server context serving ``cert_pem`` (TLS 1.2 or later); CertificateError if unusable."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    load_chain(context, cert_pem, key_pem)
    return context


def load_chain(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Put ``cert_pem``/``key_pem`` into ``context``: connections made from now on get them."""
    # A private directory, removed at once: the key is on disk only while it is read.
    with tempfile.TemporaryDirectory(prefix="kueue-tas-tls-") as tmp:
        cert_path, key_path = Path(tmp) / CERT_FILE, Path(tmp) / KEY_FILE
        cert_path.write_bytes(cert_pem)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem)
        try:
            context.load_cert_chain(cert_path, key_path)
        except (ssl.SSLError, OSError) as exc:
            raise CertificateError(f"cannot serve this certificate and key: {exc}") from exc
