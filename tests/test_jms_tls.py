"""The JMS-style API over stomp+ssl:// against a real ActiveMQ: the broker's certificate is
verified (a test CA, host name 127.0.0.1), and a broker that asks for a client certificate
gets one."""
import shutil
import subprocess

import pytest

from amqstomp.exception import ConnectFailedException
from amqstomp.jms import ConnectionFactory, Queue, TextMessage

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


def _run(*args):
    subprocess.run(list(args), check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    keytool, openssl = shutil.which("keytool"), shutil.which("openssl")
    if keytool is None or openssl is None:
        pytest.skip("keytool and openssl are needed to make certificates")
    d = tmp_path_factory.mktemp("jms-tls")
    store = str(d / "broker.p12")
    _run(keytool, "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048",
         "-dname", "CN=127.0.0.1", "-ext", "SAN=IP:127.0.0.1,DNS:localhost", "-validity", "2",
         "-storetype", "PKCS12", "-keystore", store, "-storepass", "secret123", "-keypass", "secret123")
    broker_pem = str(d / "broker.pem")
    _run(keytool, "-exportcert", "-rfc", "-alias", "broker", "-keystore", store, "-storepass", "secret123",
         "-file", broker_pem)
    client_key, client_cert = str(d / "client.key"), str(d / "client.pem")
    _run(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", client_key, "-out", client_cert,
         "-days", "2", "-subj", "/CN=amqstomp-test-client")
    trust = str(d / "trust.p12")
    _run(keytool, "-importcert", "-noprompt", "-alias", "client", "-file", client_cert, "-storetype", "PKCS12",
         "-keystore", trust, "-storepass", "secret123")
    return {"keystore": store, "broker_pem": broker_pem, "client_key": client_key, "client_cert": client_cert,
            "truststore": trust}


@pytest.fixture(scope="module")
def tls_brokers(certs):
    from amqstomp.testing import ActiveMQBroker

    plain = ActiveMQBroker(ssl={"keystore": certs["keystore"], "keystore_password": "secret123"},
                           broker_name="jms-tls")
    mutual = ActiveMQBroker(ssl={"keystore": certs["keystore"], "keystore_password": "secret123",
                                 "truststore": certs["truststore"], "truststore_password": "secret123",
                                 "need_client_auth": True}, broker_name="jms-mtls")
    plain.start()
    try:
        mutual.start()
        try:
            yield plain, mutual
        finally:
            mutual.stop()
    finally:
        plain.stop()


def _round_trip(factory):
    with factory.create_connection() as conn:
        session = conn.create_session()
        queue = Queue("tls.round.trip")
        session.create_producer(queue).send(TextMessage("über TLS"))
        consumer = session.create_consumer(queue)
        conn.start()
        message = consumer.receive(10)
        assert message is not None and message.text == "über TLS"
        assert conn._state.consumer_link.transport.tls
        assert conn._state.producer_link().transport.tls


def test_tls_verifies_the_broker(certs, tls_brokers):
    plain, _ = tls_brokers
    url = "stomp+ssl://127.0.0.1:%d?heartBeat=1000,1000" % plain.stomp_ssl_port
    _round_trip(ConnectionFactory(url, ca_certs=certs["broker_pem"]))
    with pytest.raises(ConnectFailedException, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        ConnectionFactory(url).create_connection()  # the system CAs do not know the test CA


def test_tls_client_certificate(certs, tls_brokers):
    _, mutual = tls_brokers
    url = "stomp+ssl://127.0.0.1:%d" % mutual.stomp_ssl_port
    _round_trip(ConnectionFactory(url, ca_certs=certs["broker_pem"], cert_file=certs["client_cert"],
                                  key_file=certs["client_key"]))
    with pytest.raises(ConnectFailedException):
        ConnectionFactory(url, ca_certs=certs["broker_pem"], connection_timeout_ms=5000).create_connection()
