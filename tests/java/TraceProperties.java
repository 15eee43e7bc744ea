// tests/java/TraceProperties.java: a Java JMS client (ActiveMQ's OpenWire client, JMS 1.1) for
// tests/test_otel_java.py, carrying W3C trace context the way the OpenTelemetry Java agent's JMS
// instrumentation does: as the JMS string properties "traceparent" (and "tracestate").
//
// Compiled and run by the test (javac against Debian ActiveMQ's client jars). Arguments:
//   consume URL QUEUE TIMEOUT_MS          receive one message; print "traceparent=<value>" (or
//                                         "traceparent=" when it has none), or "timeout"
//   produce URL QUEUE TRACEPARENT         send one TextMessage with that "traceparent" property
// Exit status 0 when it did so, 2 on a timeout, 1 on an error.
import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.apache.activemq.ActiveMQConnectionFactory;

public final class TraceProperties {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: TraceProperties consume URL QUEUE TIMEOUT_MS | produce URL QUEUE TRACEPARENT");
            System.exit(1);
        }
        Connection connection = new ActiveMQConnectionFactory(args[1]).createConnection();
        try {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            if (args[0].equals("consume")) {
                MessageConsumer consumer = session.createConsumer(session.createQueue(args[2]));
                Message message = consumer.receive(Long.parseLong(args[3]));
                if (message == null) {
                    System.out.println("timeout");
                    System.exit(2);
                }
                String value = message.getStringProperty("traceparent");
                System.out.println("traceparent=" + (value == null ? "" : value));
            } else {
                MessageProducer producer = session.createProducer(session.createQueue(args[2]));
                TextMessage message = session.createTextMessage("from java");
                message.setStringProperty("traceparent", args[3]);
                producer.send(message);
                System.out.println("sent");
            }
        } finally {
            connection.close();
        }
    }
}
