"""The sandbox cluster's certificate authority and the API server's serving certificate.

Why: a pod reaches the API server the way the official client's ``load_incluster_config``
says - ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``, verified against
``/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`` (``kubernetes/config/incluster_config.py``
builds an ``https://`` URL unconditionally). So the sandbox serves HTTPS to its pods, with a CA
it generates per sandbox (kept only in memory and in the files it hands out) whose certificate
is the pod's ``ca.crt``; the serving certificate names the addresses pods dial and the
``kubernetes.default.svc`` names kube-apiserver's certificate carries.

Keys are ECDSA P-256 (fast to generate; what kubeadm's ``--encryption-algorithm`` offers
besides RSA). The certificates live for :data:`VALIDITY_DAYS`, far beyond any sandbox.
"""

from __future__ import annotations

import datetime
import ipaddress
import pathlib
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: How long the CA and serving certificates are valid.
VALIDITY_DAYS = 365
#: Backdating of ``notBefore``, so a client clock slightly behind still accepts them.
CLOCK_SKEW_ALLOWANCE_SECONDS = 300
#: The DNS names kube-apiserver's serving certificate carries (kubeadm's defaults).
API_SERVER_DNS_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "localhost",
)


@dataclass(frozen=True)
class ServingCertificate:
    """PEM texts: the CA's certificate (``ca.crt``), the server's certificate and key."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def load_into(self, context: ssl.SSLContext) -> ssl.SSLContext:
        """Make ``context`` present this certificate (connections made later get it)."""
        # ssl loads chains from files only; the key never outlives this call on disk.
        with tempfile.TemporaryDirectory(prefix="sky-kueue-tls-") as directory:
            cert_path, key_path = pathlib.Path(directory) / "tls.crt", pathlib.Path(directory) / "tls.key"
            cert_path.write_bytes(self.cert_pem)
            key_path.touch(mode=0o600)
            key_path.write_bytes(self.key_pem)
            context.load_cert_chain(cert_path, key_path)
        return context

    def server_context(self) -> ssl.SSLContext:
        """A server-side TLS context presenting this certificate (TLS 1.2 or later)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return self.load_into(context)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(now: datetime.datetime | None) -> tuple[datetime.datetime, datetime.datetime]:
    moment = (now or datetime.datetime.now(datetime.timezone.utc)) - datetime.timedelta(
        seconds=CLOCK_SKEW_ALLOWANCE_SECONDS
    )
    return moment, moment + datetime.timedelta(days=VALIDITY_DAYS)


class CertificateAuthority:
    """A sandbox's CA: created once, it signs serving certificates for the addresses pods dial
    (more can be named later, e.g. the pod network's gateway once it exists)."""

    def __init__(self, *, now: datetime.datetime | None = None) -> None:
        start, until = _validity(now)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = _name("sky-kueue-sandbox-ca")
        certificate = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.ca_pem = certificate.public_bytes(serialization.Encoding.PEM)

    def issue(self, ip_addresses: Iterable[str], *, now: datetime.datetime | None = None) -> ServingCertificate:
        """A serving certificate for ``ip_addresses`` and the API server's DNS names."""
        start, until = _validity(now)
        server_key = ec.generate_private_key(ec.SECP256R1())
        alternative_names: list[x509.GeneralName] = [x509.DNSName(name) for name in API_SERVER_DNS_NAMES]
        alternative_names += [x509.IPAddress(ipaddress.ip_address(a)) for a in dict.fromkeys(ip_addresses)]
        server_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("kube-apiserver"))
            .issuer_name(self._name)
            .public_key(server_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(alternative_names), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        return ServingCertificate(
            ca_pem=self.ca_pem,
            cert_pem=server_cert.public_bytes(serialization.Encoding.PEM),
            key_pem=server_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        )
