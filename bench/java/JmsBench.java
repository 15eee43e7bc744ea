// bench/java/JmsBench.java: the ActiveMQ Java client (OpenWire, JMS 1.1) in the
// produce and consume benches, beside stomp.py and amqstomp.
//
// Compiled and run by bench/_java.py (never by hand): arguments are key=value
// pairs, see usage() below. Units: counts, bytes, seconds (double).
//
// Protocol with the parent (stdout / stdin), so that the parent measures the
// JVM's CPU itself (/proc/<pid>/stat), the way the bench measures the Python
// clients, over the measured part only:
//   * after the warm-up, the program prints "@mark start" and waits for a
//     line on stdin (the parent has read the JVM's CPU counters);
//   * at the end of the measured part, "@mark end", and waits again;
//   * the last line is one JSON object: {"ok": true, "seconds": ..., ...} or
//     {"ok": false, "error": "..."}.
//
// Warm-up: before the measured part the program runs the same case with the
// same message count on "<queue>.warmup" (a consume case first produces that
// backlog itself, then consumes it with the case's ack mode and prefetch), so
// that the JIT has compiled the send / dispatch paths before measuring.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.JMSException;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageListener;
import javax.jms.MessageProducer;
import javax.jms.Session;

import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.ActiveMQMessageProducer;
import org.apache.activemq.AsyncCallback;
import org.apache.activemq.command.ActiveMQQueue;

public final class JmsBench {
    /** ActiveMQSession.INDIVIDUAL_ACKNOWLEDGE: acknowledge() acks this message only. */
    static final int INDIVIDUAL_ACKNOWLEDGE = 4;
    static final String SEQ = "bench-seq";

    private final Map<String, String> opts;
    private final BufferedReader stdin =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));

    private JmsBench(Map<String, String> opts) {
        this.opts = opts;
    }

    static void usage() {
        System.err.println("JmsBench url=tcp://127.0.0.1:PORT queue=NAME count=N role=produce|consume"
                + " [case=async|tx100|tx1000] [ack=auto|individual] [prefetch=N] [body=256]"
                + " [warmup=N (default count)] [timeout=S]");
    }

    String opt(String key, String dflt) {
        String v = opts.get(key);
        if (v == null && dflt == null) {
            throw new IllegalArgumentException("missing " + key + "=...");
        }
        return v == null ? dflt : v;
    }

    int intOpt(String key, String dflt) {
        return Integer.parseInt(opt(key, dflt));
    }

    /** Tell the parent where we are and wait until it has sampled our CPU. */
    void mark(String what) throws Exception {
        System.out.println("@mark " + what);
        System.out.flush();
        if (stdin.readLine() == null) {
            throw new IllegalStateException("parent closed stdin at mark " + what);
        }
    }

    // ------------------------------------------------------------------ produce

    /** Send n messages of the case to queue; on return the broker has them all. */
    static void produce(Connection connection, String queue, String kase, int n, byte[] body,
                        double timeout) throws Exception {
        int batch = kase.startsWith("tx") ? Integer.parseInt(kase.substring(2)) : 0;
        Session session = connection.createSession(batch > 0,
                batch > 0 ? Session.SESSION_TRANSACTED : Session.AUTO_ACKNOWLEDGE);
        try {
            MessageProducer producer = session.createProducer(new ActiveMQQueue(queue));
            if (batch > 0) {
                // the STOMP clients' transactions hold persistent sends
                producer.setDeliveryMode(DeliveryMode.PERSISTENT);
                int sent = 0;
                while (sent < n) {
                    int upto = Math.min(n, sent + batch);
                    for (; sent < upto; sent++) {
                        BytesMessage m = session.createBytesMessage();
                        m.writeBytes(body);
                        producer.send(m);
                    }
                    session.commit(); // synchronous: the broker answers once stored
                }
                return;
            }
            producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            for (int i = 0; i < n - 1; i++) {
                BytesMessage m = session.createBytesMessage();
                m.writeBytes(body);
                producer.send(m); // jms.useAsyncSend=true: no answer awaited
            }
            // the last one persistent, with a callback on the broker's answer: ActiveMQ
            // handles one connection's commands in order, so it comes after every earlier send
            BytesMessage last = session.createBytesMessage();
            last.writeBytes(body);
            CountDownLatch done = new CountDownLatch(1);
            AtomicReference<JMSException> failed = new AtomicReference<>();
            ((ActiveMQMessageProducer) producer).send(new ActiveMQQueue(queue), last, DeliveryMode.PERSISTENT,
                    Message.DEFAULT_PRIORITY, Message.DEFAULT_TIME_TO_LIVE, new AsyncCallback() {
                        public void onSuccess() {
                            done.countDown();
                        }

                        public void onException(JMSException exc) {
                            failed.set(exc);
                            done.countDown();
                        }
                    });
            if (!done.await((long) (timeout * 1000), TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("no answer to the last send within " + timeout + " s");
            }
            if (failed.get() != null) {
                throw failed.get();
            }
        } finally {
            session.close();
        }
    }

    // ------------------------------------------------------------------ consume

    /** What one consume phase saw. */
    static final class Consumed implements MessageListener {
        final int n;
        final boolean individual;
        final boolean[] seen;
        final CountDownLatch done = new CountDownLatch(1);
        volatile Throwable error;
        int received;
        int distinct;
        int duplicates;
        int foreign;
        long first;
        long last;
        long doneNanos;

        Consumed(int n, boolean individual) {
            this.n = n;
            this.individual = individual;
            this.seen = new boolean[n];
        }

        @Override
        public void onMessage(Message message) {
            try {
                long now = System.nanoTime();
                if (received == 0) {
                    first = now;
                }
                last = now;
                received++;
                if (individual) {
                    message.acknowledge();
                }
                String seq = message.getStringProperty(SEQ);
                int i = seq == null ? -1 : Integer.parseInt(seq);
                if (i < 0 || i >= n) {
                    foreign++;
                } else if (seen[i]) {
                    duplicates++;
                } else {
                    seen[i] = true;
                    if (++distinct == n) {
                        done.countDown();
                    }
                }
            } catch (Throwable exc) {
                error = exc;
                done.countDown();
            }
        }
    }

    /** Consume n numbered messages; when measured, "@mark end" as soon as the last one is
     *  in (before the consumer closes), the point the Python consumers stop their CPU clock. */
    Consumed consume(Connection connection, String queue, boolean individual, int prefetch, int n,
                     double timeout, boolean measured, Thread filler) throws Exception {
        Session session = connection.createSession(false,
                individual ? INDIVIDUAL_ACKNOWLEDGE : Session.AUTO_ACKNOWLEDGE);
        Consumed seen = new Consumed(n, individual);
        try {
            MessageConsumer consumer = session.createConsumer(
                    new ActiveMQQueue(queue + "?consumer.prefetchSize=" + prefetch));
            consumer.setMessageListener(seen);
            if (filler != null) {
                filler.start();
            }
            if (!seen.done.await((long) (timeout * 1000), TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("saw " + seen.distinct + " of " + n + " messages within "
                        + timeout + " s");
            }
            seen.doneNanos = System.nanoTime();
            if (seen.error != null) {
                throw new IllegalStateException("listener failed: " + seen.error, seen.error);
            }
            if (measured) {
                mark("end");
            }
            consumer.close();
        } finally {
            session.close();
        }
        return seen;
    }

    /** A numbered backlog for a consume warm-up, sent on a connection of its own (the
     *  broker's producer flow control then never holds the consumer's acks back) while
     *  the warm-up consumer takes it: the broker never holds the warm-up backlog whole
     *  beside the measured one. */
    static Thread filler(ActiveMQConnectionFactory factory, String queue, int n, byte[] body,
                         AtomicReference<Throwable> failed) {
        Thread t = new Thread(() -> {
            try {
                Connection connection = factory.createConnection();
                try {
                    fill(connection, queue, n, body);
                } finally {
                    connection.close();
                }
            } catch (Throwable exc) {
                failed.set(exc);
            }
        }, "warm-up filler");
        t.setDaemon(true);
        return t;
    }

    static void fill(Connection connection, String queue, int n, byte[] body) throws Exception {
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        try {
            MessageProducer producer = session.createProducer(new ActiveMQQueue(queue));
            producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            for (int i = 0; i < n; i++) {
                BytesMessage m = session.createBytesMessage();
                m.writeBytes(body);
                m.setStringProperty(SEQ, Integer.toString(i));
                producer.send(m);
            }
        } finally {
            session.close(); // the consumer waits for every message
        }
    }

    // ------------------------------------------------------------------ main

    String run() throws Exception {
        String url = opt("url", null);
        String queue = opt("queue", null);
        String role = opt("role", null);
        int count = intOpt("count", null);
        int warmup = intOpt("warmup", Integer.toString(count));
        double timeout = Double.parseDouble(opt("timeout", "120"));
        byte[] body = new byte[intOpt("body", "256")];
        java.util.Arrays.fill(body, (byte) 'x');
        if (count < 1) {
            throw new IllegalArgumentException("count must be >= 1");
        }
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(
                url + (url.contains("?") ? "&" : "?") + "jms.useAsyncSend=true");
        Connection connection = factory.createConnection();
        connection.start();
        try {
            StringBuilder out = new StringBuilder("{\"ok\": true, \"role\": \"").append(role).append('"');
            long t0;
            long t1;
            if (role.equals("produce")) {
                String kase = opt("case", "async");
                if (warmup > 0) {
                    produce(connection, queue + ".warmup", kase, warmup, body, timeout);
                }
                mark("start");
                t0 = System.nanoTime();
                produce(connection, queue, kase, count, body, timeout);
                t1 = System.nanoTime();
                mark("end");
                out.append(", \"case\": \"").append(kase).append('"');
            } else if (role.equals("consume")) {
                boolean individual = opt("ack", "auto").equals("individual");
                int prefetch = intOpt("prefetch", "1000");
                if (warmup > 0) {
                    AtomicReference<Throwable> failed = new AtomicReference<>();
                    try {
                        consume(connection, queue + ".warmup", individual, prefetch, warmup, timeout, false,
                                filler(factory, queue + ".warmup", warmup, body, failed));
                    } catch (Exception exc) {
                        if (failed.get() != null) {
                            throw new IllegalStateException("warm-up backlog: " + failed.get(), exc);
                        }
                        throw exc;
                    }
                }
                mark("start");
                t0 = System.nanoTime();
                Consumed seen = consume(connection, queue, individual, prefetch, count, timeout, true, null);
                t1 = seen.doneNanos;
                double span = (seen.last - seen.first) / 1e9;
                out.append(", \"received\": ").append(seen.received)
                        .append(", \"distinct\": ").append(seen.distinct)
                        .append(", \"duplicates\": ").append(seen.duplicates)
                        .append(", \"foreign\": ").append(seen.foreign)
                        .append(", \"span_s\": ").append(span)
                        .append(", \"first_message_s\": ").append((seen.first - t0) / 1e9)
                        .append(", \"msg_per_s\": ").append(span > 0 ? Double.toString((seen.received - 1) / span)
                                : "null");
            } else {
                throw new IllegalArgumentException("role must be produce or consume, got " + role);
            }
            out.append(", \"count\": ").append(count).append(", \"warmup\": ").append(warmup)
                    .append(", \"seconds\": ").append((t1 - t0) / 1e9)
                    .append(", \"java\": \"").append(System.getProperty("java.version")).append('"')
                    .append(", \"activemq_client\": \"")
                    .append(ActiveMQConnectionFactory.class.getPackage().getImplementationVersion()).append("\"}");
            return out.toString();
        } finally {
            connection.close();
        }
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq <= 0) {
                usage();
                System.exit(2);
            }
            opts.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        String line;
        int status = 0;
        try {
            line = new JmsBench(opts).run();
        } catch (Throwable exc) {
            exc.printStackTrace();
            line = "{\"ok\": false, \"error\": " + quote(exc.toString()) + "}";
            status = 1;
        }
        System.out.println(line);
        System.out.flush();
        System.exit(status); // do not wait on the client's non-daemon threads
    }
}
