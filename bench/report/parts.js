'use strict'

// The parts of the suite, in the order `npm run bench` runs them and the report shows them.
//   script    the bench, run as a child process (node bench/SCRIPT [--quick] --results DIR);
//             each is built on bench/lib/part.js: it reports its progress and writes
//             RESULTS/NAME.json itself
//   estimate  seconds a full and a quick run take on an idle 2-core machine: the time left
//             shown while the suite runs starts from these and is corrected as parts finish

const PARTS = [
  { name: 'balancer', about: 'latency against the ideal central queue at ρ 0.55, 0.8, 0.9, per front (pool, HAProxy 2.6 and 3.0, cluster, PM2)', script: 'balancer.js', own: true, estimate: { full: 290, quick: 60 } },
  { name: 'overhead', about: 'latency a front adds to a 0 ms request, new connection and kept alive', script: 'overhead.js', own: true, estimate: { full: 45, quick: 25 } },
  { name: 'costs', about: 'CPU per request of each front against a minimal Node balancer (200 new, 200 and 1000 kept-alive req/s, saturation), what one pinned core of each serves, an idle pool\'s CPU and memory against Node\'s cluster, CPU-bound renders', script: 'costs.js', own: true, estimate: { full: 660, quick: 150 } },
  { name: 'matrix', about: 'the operator\'s matrix: ab-style and keep-alive clients, 5 situations × 3 concurrencies × 4 fronts, open-loop kills and reloads', script: 'matrix.js', own: true, estimate: { full: 1350, quick: 350 } },
  { name: 'kill-timeline', about: 'req/s and failures over time while workers are killed', script: 'kill-timeline.js', own: true, estimate: { full: 95, quick: 25 } },
  { name: 'soak', about: 'failed requests, capacity over time and reloads asked and done while a worker is SIGKILLed every 2 s and a reload asked every 30 s', script: 'soak.js', own: true, estimate: { full: 320, quick: 95 } },
  { name: 'death-notice', about: 'from a worker\'s SIGKILL to the front\'s notice, quiet and under load', script: 'death-notice.js', own: true, estimate: { full: 120, quick: 45 } },
  { name: 'haproxy-kill', about: 'failed requests per kill, per HAProxy configuration', script: 'haproxy-kill.js', own: true, estimate: { full: 165, quick: 33 } },
  { name: 'reload', about: 'latency during a rolling reload against steady state, per front (pool, HAProxy, cluster, PM2)', script: 'reload.js', own: true, estimate: { full: 170, quick: 60 } },
  { name: 'slow-clients', about: 'worker busy time with slow uploaders and readers', script: 'slow-clients.js', own: true, estimate: { full: 80, quick: 25 } },
  { name: 'non-readers', about: 'good clients\' pages per second beside 40, 80 and 200 clients that read nothing (and 4 at a 16 MB budget, at K=1)', script: 'non-readers.js', own: true, estimate: { full: 60, quick: 15 } },
  { name: 'streaming', about: 'time to the first byte of a streamed page per front, at 1 client and at ρ 0.8; how long a slow reader of one holds a worker', script: 'streaming.js', own: true, estimate: { full: 560, quick: 150 } },
  {
    name: 'streams',
    about: 'long-lived streams (server-sent events) per front at 100, 1,000 and 10,000: served, memory per stream, ' +
      'token delay against one plain process, hang-up to the app, a CPU-bound page\'s p99 beside 1,000 streams',
    script: 'streams.js',
    own: true,
    estimate: { full: 740, quick: 185 }
  },
  {
    name: 'websocket',
    about: 'WebSockets per front at 1,000 and 10,000 (9,000 where the descriptors allow no more): tunnels held idle and ' +
      'memory per tunnel, echo round trip against one plain process, echoes a second from one client core, an HTTP ' +
      'page\'s p99 beside 1,000 sockets that echo, a reload with 1,000 open',
    script: 'websocket.js',
    own: true,
    estimate: { full: 300, quick: 110 }
  },
  { name: 'body-budget', about: 'front RSS against large POSTs queued at once (the body budget; nginx spilling to disk)', script: 'body-budget.js', own: true, estimate: { full: 180, quick: 60 } },
  { name: 'overload', about: 'goodput under overload, clients with deadlines; overload control against a FIFO where a FIFO keeps up: below capacity, mixed routes, closed-loop clients after a burst of fast requests', script: 'overload.js', own: true, estimate: { full: 1000, quick: 150 } },
  { name: 'concurrency', about: 'pages awaiting data, CPU-bound renders and the mix at 5, 13 and 20 closed-loop clients and open loop at ρ 0.5 and 0.8: the pool at --worker-concurrency 1 and 16 (its default) against Node\'s cluster, one plain process and, on pages awaiting data, a bare Node relay (req/s, p50, p99, RSS)', script: 'concurrency.js', own: true, estimate: { full: 1650, quick: 200 } },
  { name: 'fleet', about: 'hosts × workers behind an edge HAProxy against the ideal', script: 'fleet.js', own: true, estimate: { full: 100, quick: 25 } }
]

module.exports = { PARTS }
