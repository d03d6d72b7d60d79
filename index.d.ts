// Types for `pool-supervisor` (`pool`): a process-pool supervisor for CPU-heavy Node.js HTTP services.
// Durations are milliseconds. Defaults are given in each comment and in README.md.

import type { EventEmitter } from 'node:events'
import type { IncomingMessage, ServerResponse, Server } from 'node:http'
import type { Logger } from 'pino'
import type { Registry, Counter } from 'prom-client'

export type RequestListener = (req: IncomingMessage, res: ServerResponse) => void
/**
 * Anything `listen()` and the app module may hand over: a request listener (an Express app), an
 * http.Server not listening yet, a Koa app (`callback()`), a Fastify instance (served once
 * `ready()` resolves) or a hapi server (served once `initialize()` resolves).
 */
export type Servable =
  | RequestListener
  | Server
  | { callback(): RequestListener }
  | { server: Server, ready(): PromiseLike<unknown> }
  | { listener: Server, initialize(): PromiseLike<unknown> }

/**
 * Serve `target` behind the pool's guard, which lets at most K requests render at once (until
 * each one's response head is written). Under `pool start` K is `--worker-concurrency`, and the
 * pool's runtime binds the slot's port and reports readiness to the supervisor; under plain
 * `node app.js` K is 1 and it listens on `$PORT` (default 3000).
 */
export function listen (target: Servable, options?: { port?: number, host?: string }): Server

/**
 * Aborts once this process is to leave, its `reason` a PoolError with code
 * `POOL_E_WORKER_DRAINING` and `details.reason` saying why. Under `pool start`: when the worker
 * is told to drain ('stop', 'reload', 'scale-down', 'max-requests', 'max-rss', 'recycle',
 * 'listener-closed') or its supervisor is gone ('supervisor-gone'). Under plain `node app.js`:
 * at the first SIGTERM or SIGINT ('SIGTERM', 'SIGINT'), listened for from the first read of
 * `draining`; without a listener of the app's for that signal, the process still ends by it
 * 100 ms later. Close long-lived connections here: `ws.close(1001)`, and clients reconnect to
 * another worker.
 */
export declare const draining: AbortSignal

export type WorkerState = 'booting' | 'warming' | 'ready' | 'busy' | 'draining' | 'dead' | 'given-up'

/** The request a worker held longest, as its last check-in said. */
export interface RunningRequest {
  method: string
  url: string
  /** ms the request has been running */
  age: number
}

export interface WorkerSnapshot {
  slot: number
  /** the HAProxy server name, `worker<slot>` */
  name: string
  pid: number | null
  host: string
  port: number
  state: WorkerState
  startedAt: number | null
  readyAt: number | null
  /** ms since ready, 0 when not ready */
  uptime: number
  /** requests served by the current process */
  requests: number
  /** requests served in this slot by every process */
  totalRequests: number
  /** requests that found every render place of the worker taken (a balancer misconfiguration) */
  queued: number
  /** processes started in this slot after the first */
  restarts: number
  /** bytes, as last reported by the worker */
  rss: number | null
  /** the request open longest at its last check-in, null when none was */
  request: RunningRequest | null
  /** requests it held at its last check-in, rendering or streaming */
  open: number
  /** upgraded connections (WebSockets) open at its last check-in: they hold no render place */
  tunnels: number
  /** upgraded connections the current process has taken, as of its last check-in */
  tunnelsOpened: number
  /** requests it may render at once (workerConcurrency) */
  concurrency: number
  lastExit: { pid: number, code: number | null, signal: string | null, reason: string, at: number } | null
}

export interface ExitInfo extends WorkerSnapshot {
  code: number | null
  signal: string | null
  /**
   * 'crashed' (also while draining) | 'boot-failed' | 'timeout' (its event loop stopped while it
   * held requests) | 'heartbeat' (silent while idle) | 'boot-timeout' |
   * 'warmup-failed' | 'channel-broken' | 'pool-killed' | '<drain reason>-killed', or a drain's
   * own end: 'stop' | 'reload' |
   * 'scale-down' | 'max-requests' | 'max-rss' | 'recycle' | 'listener-closed'
   */
  reason: string
  /** set when the process crashed while draining for this reason */
  draining?: string
}

/**
 * Everything a front is given of the pool, at start: a front reads the pool through this and
 * nothing else.
 */
export interface FrontContext {
  /** the pool's logger */
  readonly logger: Logger
  /**
   * the pool's metrics: add your series to `registry`, count your failures in `failures`
   * (label `reason`); both appear on the stats listener's /metrics
   */
  readonly metrics: { readonly registry: Registry, readonly failures: Counter<'reason'> }
  /** a fresh snapshot of every slot, as pool.workers() */
  workers(): WorkerSnapshot[]
  /** the port slot `slot`'s worker listens on */
  portOf(slot: number): number
  /** the number of slots the pool wants now */
  target(): number
  /**
   * the other way: `worker` (a snapshot the front was given) refused `refusals` connections in a
   * row while the pool counts it ready. The pool replaces it, as if it had reported its listener
   * closed; a report about a process that no longer holds the slot is ignored.
   */
  workerRefusing(worker: Pick<WorkerSnapshot, 'slot' | 'pid'>, detail?: { refusals?: number, front?: string }): void
  /**
   * whether an edge has asked the pool's agent (--agent-port) about it: something in front
   * watches the pool, and a stop is announced to it before the front stops taking requests
   */
  agentAsked(): boolean
  /**
   * the front closed its connection for the request of this exchange (the X-Pool-Request it sent; its client left, a
   * limit ended it, its answer broke) while the app may still run it: the worker is asked to say
   * when it has ended, which the front hears as workerRequestEnded(worker, id). False when the
   * worker cannot be asked (its process is gone)
   */
  watchRequest(worker: Pick<WorkerSnapshot, 'slot' | 'pid'>, id: string): boolean
}

/**
 * What a front says of itself: the fields `pool status`, `pool ls`, /status and the status page
 * read alike for every front, and any of its own beside them (for `--json` and /status).
 */
export interface FrontStatus {
  /** the front's name: 'embedded', 'haproxy', 'none', or your own */
  type: string
  /** where its clients reach it, when it listens for them itself */
  url?: string
  /** what it drives, in a few words, when it does not listen itself ('backend pool') */
  target?: string
  /** more on where it is ('via /run/haproxy.sock (HAProxy pid 42)') */
  detail?: string
  /** what is wrong with it now ('unreachable: connect ENOENT'), or null */
  problem?: string | null
  /** requests waiting for a worker, if it queues */
  queue?: number
  /** requests on workers */
  inFlight?: number
  /** it no longer takes new clients */
  stopping?: boolean
  /** columns of its own in `pool status`: each worker's value by slot */
  columns?: Array<{ title: string, right?: boolean, values: Record<number, string | number> }>
  /** beside a worker's state on the status page, by slot */
  notes?: Record<number, { badge?: string, text?: string }>
  /** a table of its own on the status page, each row named by its first cell */
  table?: { caption: string, head: string[], rows: Array<Array<string | number | null | { badge: string, tone: string }>> }
  [field: string]: unknown
}

/** What a front (the embedded balancer, HAProxy control) is told by the supervisor. */
export interface Front {
  name?: string
  /** the address the front listens for clients on; the agent (--agent-port) listens there too by default */
  readonly host?: string
  start(context: FrontContext): Promise<void>
  workerReady(worker: WorkerSnapshot): void
  /**
   * optional, with workerConcurrency above 1: every request the worker holds (`open`) awaits I/O,
   * its event loop idle; `last` is the exchange (X-Pool-Request) of the request it started last
   */
  workerAwaiting?(worker: Pick<WorkerSnapshot, 'slot' | 'pid'>, detail: { open: number, last: string }): void
  /** optional: the request the front asked about (FrontContext.watchRequest) has ended in the worker, or was never there */
  workerRequestEnded?(worker: Pick<WorkerSnapshot, 'slot' | 'pid'> & { retired?: boolean }, id: string): void
  /**
   * sync and fast; called from the worker's exit event itself, or before the pool signals it.
   * `retired`: a drained process that had left its slot's port, still holding requests, exited
   */
  workerGone(worker: WorkerSnapshot | (Pick<WorkerSnapshot, 'slot' | 'pid' | 'name'> & { retired: true })): void
  /**
   * stop giving the worker new requests; resolve once nothing it was sent still renders (what is
   * left is long-lived: responses under way); the pool then asks it to leave its port
   */
  drain(worker: WorkerSnapshot): Promise<void>
  stopping?(): void
  stop(): Promise<void>
  status(): FrontStatus
  /**
   * optional: called by pool.scale(workers) before anything changes; throw (reject with) a
   * PoolError when the front cannot serve slots 1..workers, and the scale is refused with it.
   * Must change nothing itself: the scale may still be refused after it.
   */
  checkScale?(workers: number): Promise<void> | void
}

/** The supervisor's own options; see PoolOptions for the front. */
export interface SupervisorOptions {
  /** path of the app module (required) */
  app: string
  /** number of workers; default `$WEB_CONCURRENCY`, else the number of CPUs */
  workers?: number
  /** default '127.0.0.1' */
  workerHost?: string
  /** port of slot 1; slot i listens on workerPort + i - 1. Default 9002 */
  workerPort?: number
  /**
   * requests one worker may render at once (a request renders until its response head is
   * written; what follows, a stream, holds no place). Above 1, with the embedded balancer, a
   * worker holding requests is given another only while all of them await I/O (its event loop
   * idle). Default 16 with `balancer: 'embedded'` (without agentPort); 1 otherwise: HAProxy,
   * none, a pool's own `fronts`, a fleet's host
   */
  workerConcurrency?: number
  /**
   * a worker holding requests whose event loop has not come round this long is hung: SIGKILLed
   * with what it held. A request that lasts while the loop turns kills nothing. Seen within this
   * plus a check-in interval (a quarter of it, at most 500). Default 30000
   */
  timeout?: number
  /**
   * a response the app leaves this long without a byte (before its head, or between two parts)
   * ends that request alone: 504 when nothing was sent, cut otherwise; the app sees its response
   * close. Enforced by the embedded balancer, else by the worker. 0 = none. Default 60000
   */
  readTimeout?: number
  /** a request may last this long at most, then ends as for readTimeout. 0 = no limit (default) */
  maxRequestTime?: number
  /** a worker not ready within this is killed. Default 60000 */
  bootTimeout?: number
  /** an idle worker silent this long is treated as hung. Default 30000 (as --timeout's default) */
  heartbeatTimeout?: number
  /** how often an idle worker checks in with its RSS; below heartbeatTimeout. Default heartbeatTimeout / 3 */
  heartbeatInterval?: number
  /** on stop, how long running requests may finish before SIGTERM. Default 30000 */
  gracefulTimeout?: number
  /** after SIGTERM, how long before SIGKILL. Default 5000 */
  killTimeout?: number
  /** first respawn delay. Default 100 */
  restartDelay?: number
  /** default 1.5 */
  restartFactor?: number
  /** default 15000 */
  restartMaxDelay?: number
  /** uptime after which a slot's crash count resets. Default 30000 */
  healthyAfter?: number
  /** consecutive deaths before ready after which a slot is given up (a failed fork never counts). Default 5 */
  maxBootFailures?: number
  /** a given-up slot starts over this long after it gave up; 0 = only a reload revives it. Default 300000 */
  givenUpRetry?: number
  /** paths a new worker is sent GET requests for before it is given traffic; default none */
  warmup?: string[]
  /** warm-up requests per new worker, cycling through `warmup`. Default 5 */
  warmupRequests?: number
  /** slots replaced at a time by reload and recycling. Default 1 */
  reloadBatch?: number
  /** recycle a worker after this many requests; 0 = never (default) */
  maxRequests?: number
  /** add 0..this to each worker's request limit. Default 0 */
  maxRequestsJitter?: number
  /** recycle a worker whose RSS, as it checks in, is above this many MB; 0 = never (default) */
  maxRss?: number
  /**
   * ceiling of `workers` and scale(); 0 = none. Default min(8 × CPUs, free memory ÷ 128 MB): more
   * is refused with POOL_E_BAD_OPTION
   */
  maxWorkers?: number
  /** workers booting at once at most; more wait their turn. Default 2 × CPUs */
  maxBooting?: number
  /** port of the pool's /metrics and /status, in every mode; 0 or absent = off (the library's default) */
  statsPort?: number
  /** default '127.0.0.1' */
  statsHost?: string
  /** port of the HAProxy agent-check responder for a fleet's edge; 0 = off (default) */
  agentPort?: number
  /** default: the embedded balancer's host, else workerHost */
  agentHost?: string
  /** default 'info' */
  logLevel?: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
  /** default 'auto': pretty on a terminal, JSON lines otherwise */
  logFormat?: 'auto' | 'json' | 'pretty'
  /**
   * bytes of log lines held for a stdout reader that does not keep up; past it lines are dropped
   * and counted (pool_log_lines_dropped_total). At least 16384; default 16 MiB. Not used with `logger`
   */
  logBuffer?: number
  /** a pino logger to use instead of creating one */
  logger?: Logger
  /** extra environment for the workers */
  env?: Record<string, string>
  /** node flags for the workers; default: the supervisor's, without --inspect */
  execArgv?: string[]
  /** extra arguments for the workers' process.argv */
  args?: string[]
  /** working directory of the workers; default: the supervisor's own (inherited, so a removed one still works) */
  cwd?: string
}

/** `balancer: 'embedded'`: the built-in balancer (README, "The embedded balancer"). */
export interface EmbeddedBalancerOptions {
  /** default 9001 */
  port?: number
  /** default '127.0.0.1' */
  host?: string
  /** with workerConcurrency 1: requests one worker renders at a time. Default 1 */
  maxconn?: number
  /** requests open on all workers at once, rendering or streaming. Default (RAM ÷ 16) ÷ 16 KiB, at most half the descriptors */
  maxOpen?: number
  /** requests open on one worker at once, rendering or streaming. Default 8192 */
  workerMaxOpen?: number
  /** path prefixes of long-lived requests, 'PREFIX,...': they hold no render place and go to a worker at once, beside renders (a request that accepts text/event-stream is long-lived anyway). Default none */
  streamRoutes?: string
  /** default 'first' */
  balance?: 'first' | 'rr'
  /** times a refused request goes to another worker. Default 3 */
  retries?: number
  /** a request queued longer gets 503; 0 = forever. Default 20000 */
  queueTimeout?: number
  /** queued requests beyond this get 503 with Retry-After at once (a request with a body: before it is read). Default 1024 */
  maxQueue?: number
  /** largest request body in bytes (on the command line, in the environment and in a config file also with a unit: 512k, 8m, 1g). Default 10 MiB */
  maxBody?: number
  /** request-body bytes held at once over all requests (being read, queued, on a worker), counted as they arrive; a body that would pass it gets 503 with Retry-After (before it is read when its announced length has no room). After a burst the memory is handed back with a full GC when the process has globalThis.gc (node --expose-gc; `pool start` has it). 0 = no limit. Default 1/16 of RAM (or of the cgroup limit), at most 256 MiB, at least maxBody */
  bodyBudget?: number
  /** response bytes held for one client slower than its worker (responses are written through as the worker sends them, the balancer reading ahead of the client up to this); past it the worker waits for the client. Also the most an `X-Accel-Buffering: yes` response is held whole. 0 = no read-ahead. Default 8 MiB */
  maxResponseBuffer?: number
  /** response bytes held at once for all clients (read from workers, not yet taken by the clients); past it the balancer stops reading workers. 0 = no limit. Default 1/16 of RAM (or of the cgroup limit), at most 256 MiB, at least maxResponseBuffer */
  responseBudget?: number
  /** a WebSocket that carries no byte either way this long (ms) is closed, as HAProxy's timeout tunnel. Default 3600000; 0 = never */
  tunnelTimeout?: number
  /** default '/ping' */
  pingPath?: string
  /** on stop, when a health check (/ping) or an edge (the agent) watches the pool: ms the workers go on serving while /ping answers 503 and the agent says drain, before the listener closes (unwatched: at once). Default 2000 */
  stopAnnounce?: number
  /** default 10000 */
  headersTimeout?: number
  /** default 60000 */
  requestTimeout?: number
  /** a client that takes none of the response bytes waiting for it this long (ms) is cut off; the clock runs only while bytes wait. Default 60000; 0 = never */
  sendTimeout?: number
  /** default 5000 */
  keepAliveTimeout?: number
  /** addresses or CIDR ranges, comma-separated, or 'none'. Default '127.0.0.1,::1' */
  trustProxy?: string
  /** default true */
  accessLog?: boolean
  /** a FIFO queue until more arrives than the workers take and a FIFO could no longer answer within overloadMaxWait; then later arrivals newest first, and 503 at once for what can no longer be answered in time. Default true (false: a plain FIFO queue) */
  overloadControl?: boolean
  /** ms clients wait; default 1000 or 100 paces (the measured time between two requests leaving a busy queue) if longer, at most queueTimeout */
  overloadMaxWait?: number
  /** ms over which arrivals and the requests workers take are compared; default overloadMaxWait */
  overloadInterval?: number
  /** header whose value (high, normal, low) sets a request's class, from trustProxy peers only; default none */
  priorityHeader?: string
  /** classes by path prefix: 'PREFIX=CLASS,...'; default none */
  priorityRoutes?: string
}

/** `balancer: 'haproxy'`: drive an external HAProxy (README, "Production"). */
export interface HaproxyFrontOptions {
  /** HAProxy's runtime API at level admin: a unix socket path or host:port (required) */
  haproxySocket: string
  /** default 'pool' */
  haproxyBackend?: string
  /** default 2000 */
  haproxyCheckInterval?: number
  /** default 2000 */
  haproxyTimeout?: number
  /** keep HAProxy's server states in this file; default none */
  haproxyStateFile?: string
  /** on stop, when an edge asks the agent: ms the servers stay READY while the agent says drain; default 2000 */
  stopAnnounce?: number
}

/**
 * What `new Pool()` accepts: the supervisor's options, and what sits in front of the workers,
 * either `balancer` with that front's options, or your own `fronts`. Unknown keys are refused
 * (POOL_E_BAD_OPTION), so a typo is never silently ignored.
 */
export type PoolOptions = SupervisorOptions & (
  | ({ balancer?: 'none', fronts?: Front[] } & { [K in keyof EmbeddedBalancerOptions | keyof HaproxyFrontOptions]?: never })
  | ({ balancer: 'embedded' } & EmbeddedBalancerOptions)
  | ({ balancer: 'haproxy' } & HaproxyFrontOptions)
)

export interface PoolStatus {
  pid: number
  app: string
  phase: 'idle' | 'starting' | 'running' | 'stopping' | 'stopped'
  target: number
  /** the front's status, or a list of them when the pool has several */
  front: FrontStatus | FrontStatus[]
  queue: number
  /** the stats listener's URL, or null when off */
  stats: string | null
  /** the agent-check responder's host:port, or null when off */
  agent: string | null
  /** `queued`: reloads asked while this one runs, all answered by the one that follows it */
  reload: { stage: string, pending: number, active: number[], replaced: number, queued: number } | null
  /** `cpu`: CPU time the process has used, in microseconds, read at `at` (ms); null when none runs */
  workers: Array<WorkerSnapshot & { cpu: { user: number, system: number, at: number } | null }>
  /** drained processes that left their slot's port with requests open, finishing them: SIGTERM in `termIn` ms */
  retiring: Array<{ slot: number, pid: number, reason: string, termIn: number }>
  /** the last 20 worker exits, newest first */
  recentExits: Array<{ slot: number, name: string, pid: number, code: number | null, signal: string | null, reason: string, planned: boolean, at: number }>
}

export interface ReloadResult {
  replaced: Array<{ slot: number, oldPid: number, newPid: number }>
  ms: number
}

export interface RecycleResult {
  slot: number
  oldPid: number
  newPid: number
  /** from the call until the new worker was ready */
  ms: number
}

export declare class Pool extends EventEmitter {
  constructor (options: PoolOptions)
  readonly options: Required<Omit<SupervisorOptions, 'logger' | 'env' | 'execArgv' | 'args' | 'cwd' | 'statsPort' | 'agentHost'>> & Pick<SupervisorOptions, 'statsPort' | 'agentHost'>
  readonly logger: Logger
  /** resolves when every slot is ready or given up (at least one ready) */
  start (): Promise<this>
  /** graceful stop; `clean` is false when a worker had to be signalled */
  stop (options?: { timeout?: number }): Promise<{ clean: boolean }>
  /** SIGKILL every worker now */
  kill (): Promise<{ clean: boolean }>
  /**
   * rolling reload; rejects with POOL_E_RELOAD_FAILED (old workers keep serving),
   * POOL_E_NOT_STARTED or POOL_E_STOPPING. Asked while one runs, it is merged into the one reload
   * that follows it, and resolves with that reload's result. Never throws: every method that
   * returns a promise reports its errors through it.
   */
  reload (): Promise<ReloadResult>
  /** rejects with POOL_E_BAD_OPTION, POOL_E_BUSY (a later scale took over), POOL_E_STOPPING... */
  scale (workers: number): Promise<{ from: number, to: number }>
  /**
   * replace slot `slot`'s worker with a new process through the drain path, as --max-requests
   * does (its running request finishes; at most `reloadBatch` slots out of service at once);
   * resolves once the new worker is ready. Rejects with POOL_E_BAD_OPTION (no such slot, or
   * given up), POOL_E_BUSY (the slot has no serving worker now, or a scale-down removed it),
   * POOL_E_BOOT_FAILED (the new worker never booted), POOL_E_NOT_STARTED or POOL_E_STOPPING.
   */
  recycle (slot: number): Promise<RecycleResult>
  workers (): WorkerSnapshot[]
  status (): PoolStatus

  /** `busy` and `idle`: as the worker's check-ins see it (it holds requests, then none) */
  on (event: 'spawn' | 'ready' | 'busy' | 'idle' | 'removed', listener: (worker: WorkerSnapshot) => void): this
  on (event: 'state', listener: (worker: WorkerSnapshot & { from: WorkerState }) => void): this
  on (event: 'exit', listener: (worker: ExitInfo) => void): this
  on (event: 'hung', listener: (worker: WorkerSnapshot & { reason: 'timeout' | 'heartbeat' }) => void): this
  on (event: 'draining', listener: (worker: WorkerSnapshot & { reason: string }) => void): this
  /** a request found every render place of a worker taken: `running` is the request it started last, as the worker says */
  on (event: 'queued', listener: (worker: WorkerSnapshot & { waiting: number, running: { method: string, url: string } | null }) => void): this
  on (event: 'boot-failed', listener: (worker: ExitInfo & { error: { message: string, stack: string } | null }) => void): this
  on (event: 'give-up', listener: (worker: WorkerSnapshot & { error: { message: string, stack?: string } }) => void): this
  /** a given-up slot starts over, --given-up-retry after it gave up */
  on (event: 'given-up-retry', listener: (worker: WorkerSnapshot) => void): this
  /** the fork itself failed (EMFILE, ENFILE, EAGAIN, ENOMEM): no process ran; the slot tries again after its backoff */
  on (event: 'spawn-error', listener: (worker: WorkerSnapshot & { error: { message: string, code: string | null, errno: number | null, syscall: string | null } }) => void): this
  /** the worker's port refuses connections while it lives: `by` 'worker' (it said so) or the front that found out */
  on (event: 'listener-closed', listener: (worker: WorkerSnapshot & { by: string, error: { message: string, code?: string } | null, refusals: number | null }) => void): this
  on (event: 'stopping', listener: () => void): this
  on (event: 'stopped', listener: (result: { clean: boolean }) => void): this
  on (event: 'failed', listener: (error: PoolError) => void): this
}

export declare class PoolError extends Error {
  code: string
  details?: Record<string, unknown>
}

export declare const codes: {
  readonly BAD_OPTION: 'POOL_E_BAD_OPTION'
  readonly APP_NOT_FOUND: 'POOL_E_APP_NOT_FOUND'
  readonly PORT_IN_USE: 'POOL_E_PORT_IN_USE'
  readonly BOOT_FAILED: 'POOL_E_BOOT_FAILED'
  readonly NOT_STARTED: 'POOL_E_NOT_STARTED'
  readonly STOPPING: 'POOL_E_STOPPING'
  readonly HAPROXY_SOCKET: 'POOL_E_HAPROXY_SOCKET'
  readonly HAPROXY_PERMISSION: 'POOL_E_HAPROXY_PERMISSION'
  readonly HAPROXY_LEVEL: 'POOL_E_HAPROXY_LEVEL'
  readonly HAPROXY_NO_BACKEND: 'POOL_E_HAPROXY_NO_BACKEND'
  readonly HAPROXY_NO_SERVER: 'POOL_E_HAPROXY_NO_SERVER'
  readonly HAPROXY_COMMAND: 'POOL_E_HAPROXY_COMMAND'
  readonly CONTROL_IN_USE: 'POOL_E_CONTROL_IN_USE'
  readonly CONTROL_UNREACHABLE: 'POOL_E_CONTROL_UNREACHABLE'
  readonly RELOAD_FAILED: 'POOL_E_RELOAD_FAILED'
  readonly BUSY: 'POOL_E_BUSY'
  readonly INTERNAL: 'POOL_E_INTERNAL'
  readonly WORKER_DRAINING: 'POOL_E_WORKER_DRAINING'
  readonly BODY_TOO_LARGE: 'POOL_E_BODY_TOO_LARGE'
  readonly BODY_OVER_BUDGET: 'POOL_E_BODY_OVER_BUDGET'
  readonly CLIENT_ABORTED: 'POOL_E_CLIENT_ABORTED'
  readonly PROXY_TIMEOUT: 'POOL_E_PROXY_TIMEOUT'
  readonly WORKER_GONE: 'POOL_E_WORKER_GONE'
  readonly BAD_RESPONSE: 'POOL_E_BAD_RESPONSE'
}
