"""The rehearsal's keys and certificates: one CA, the API server's serving certificate and
the service-account signing key, written into the run's folder and gone with it."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.TraditionalOpenSSL,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _cert(subject: str, key: rsa.RSAPrivateKey, issuer: x509.Certificate | None,
          issuer_key: rsa.RSAPrivateKey, sans: list[x509.GeneralName] | None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer.subject if issuer else name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None),
                              critical=True))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(folder: Path, advertise_address: str) -> Pki:
    """Keys for one run. The serving certificate names loopback, the advertised address and
    the in-cluster names, so a client may use any of them."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, serving_key, sa_key = _key(), _key(), _key()
    ca = _cert("raytpu-rehearsal-ca", ca_key, None, ca_key, None)
    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address(advertise_address)),
        x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
        x509.DNSName("localhost"), x509.DNSName("kubernetes.default.svc"),
    ]
    serving = _cert("kube-apiserver", serving_key, ca, ca_key, sans)
    pki = Pki(folder / "ca.crt", folder / "ca.key", folder / "apiserver.crt",
              folder / "apiserver.key", folder / "sa.key", folder / "sa.pub")
    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.serving_cert.write_bytes(serving.public_bytes(serialization.Encoding.PEM))
    _write_key(ca_key, pki.ca_key)
    _write_key(serving_key, pki.serving_key)
    _write_key(sa_key, pki.sa_key)
    pki.sa_pub.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return pki
