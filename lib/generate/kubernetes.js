'use strict'

// `pool config kubernetes`: the manifests of an elastic fleet on Kubernetes, one YAML stream. Pods
// run `pool start` (each a host of the fleet, its agent on), a headless Service lists the ready
// ones in DNS, and an edge HAProxy (`pool config edge --discover`, in a ConfigMap) finds them
// there and keeps one queue for all of them. The pods' timeouts come from the pool's own, so
// that Kubernetes never kills a pool that is still finishing its requests.

const { resolveOptions, OPTIONS: POOL_OPTIONS } = require('../options/table')
const { OPTIONS: BALANCER_OPTIONS } = require('../fronts/balancer/options')
const { edgeConfig } = require('./edge')
const { stopTimeoutSeconds } = require('./systemd')
const { duration } = require('./haproxy')
const { poolError, codes } = require('../errors')

// A Kubernetes object name (DNS-1035 label): what a Service name must be.
const NAME = /^[a-z]([-a-z0-9]{0,50}[a-z0-9])?$/
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/
const DOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/
const QUANTITY = /^\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/
const UNSAFE_WORD = /[\s"'\\$`]/

// In the option table's format, so the CLI builds its flags from it.
const OPTIONS = {
  name: {
    flag: 'name',
    kind: 'string',
    default: 'pool-app',
    group: 'Kubernetes',
    describe: 'Name of the pods\' Deployment and headless Service; the edge\'s objects are NAME-edge'
  },
  namespace: {
    flag: 'namespace',
    kind: 'string',
    default: 'default',
    group: 'Kubernetes',
    describe: 'Namespace of every object (the edge finds the pods at _http._tcp.NAME.NAMESPACE.svc.CLUSTER-DOMAIN)'
  },
  clusterDomain: {
    flag: 'cluster-domain',
    kind: 'string',
    default: 'cluster.local',
    group: 'Kubernetes',
    describe: 'The cluster\'s DNS domain'
  },
  image: {
    flag: 'image',
    kind: 'string',
    group: 'Kubernetes',
    defaultText: 'required',
    describe: 'The app\'s image, whose entrypoint is `pool start` (examples/container/Dockerfile)'
  },
  app: {
    flag: 'app',
    kind: 'string',
    default: 'server.js',
    group: 'Kubernetes',
    describe: 'The app `pool start` runs, in the image\'s working directory'
  },
  replicas: {
    flag: 'replicas',
    kind: 'count',
    default: 3,
    group: 'Kubernetes',
    describe: 'Pods at first (a HorizontalPodAutoscaler may change it; the edge follows)'
  },
  cpu: {
    flag: 'cpu',
    kind: 'string',
    default: '2',
    group: 'Kubernetes',
    describe: 'CPU request and limit of each pod: the pool\'s -n follows the limit (the cgroup\'s quota)'
  },
  memory: {
    flag: 'memory',
    kind: 'string',
    default: '2Gi',
    group: 'Kubernetes',
    describe: 'Memory request and limit of each pod: the pool\'s worker ceiling and --body-budget follow it'
  },
  preStop: {
    flag: 'pre-stop',
    kind: 'duration',
    default: 5000,
    group: 'Kubernetes',
    describe: 'How long a terminating pod sleeps before its pool hears SIGTERM, while the Service\'s endpoints and ' +
      'DNS drop it'
  },
  maxHosts: {
    flag: 'max-hosts',
    kind: 'count',
    default: 32,
    group: 'Edge',
    describe: 'Most pods the edge sends to at once (its server-template)'
  },
  edgeImage: {
    flag: 'edge-image',
    kind: 'string',
    default: 'haproxy:2.6',
    group: 'Edge',
    describe: 'The edge\'s HAProxy image (2.6 or later)'
  },
  edgeServiceType: {
    flag: 'edge-service-type',
    kind: 'choice',
    choices: ['ClusterIP', 'NodePort', 'LoadBalancer'],
    default: 'ClusterIP',
    group: 'Edge',
    describe: 'How clients reach the edge'
  },
  trustProxy: {
    ...BALANCER_OPTIONS.trustProxy,
    default: '10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fd00::/8',
    group: 'Pool',
    describe: 'The pool\'s --trust-proxy in each pod: the pod network, where the edge\'s requests come from'
  },
  port: {
    ...BALANCER_OPTIONS.port,
    group: 'Pool',
    describe: 'The pool\'s --port in each pod (the embedded balancer, on 0.0.0.0)'
  },
  agentPort: {
    ...POOL_OPTIONS.agentPort,
    default: 9100,
    kind: 'port',
    group: 'Pool',
    describe: 'The pool\'s --agent-port in each pod, asked by the edge'
  },
  timeout: {
    ...POOL_OPTIONS.timeout,
    group: 'Pool',
    describe: 'The pool\'s --timeout; the edge\'s server timeout is set above it'
  },
  gracefulTimeout: {
    ...POOL_OPTIONS.gracefulTimeout,
    group: 'Pool',
    describe: 'The pool\'s --graceful-timeout; terminationGracePeriodSeconds is set above it'
  },
  killTimeout: {
    ...POOL_OPTIONS.killTimeout,
    group: 'Pool',
    describe: 'The pool\'s --kill-timeout; terminationGracePeriodSeconds is set above it'
  }
}

function bad (message) {
  return poolError(codes.BAD_OPTION, message)
}

function resolveKubernetesOptions (input = {}) {
  const o = resolveOptions(input, OPTIONS)
  if (o.image === undefined) {
    throw bad('--image is required: the app\'s image, whose entrypoint is `pool start` (examples/container/Dockerfile)')
  }
  if (!NAME.test(o.name)) {
    throw bad('--name must be a DNS label of at most 47 characters (lower-case letters, digits, \'-\'; a letter ' +
      `first), so that NAME-edge fits (got '${o.name}')`)
  }
  if (!NAMESPACE.test(o.namespace)) throw bad(`--namespace must be a DNS label (got '${o.namespace}')`)
  if (!DOMAIN.test(o.clusterDomain)) throw bad(`--cluster-domain must be a DNS domain (got '${o.clusterDomain}')`)
  for (const flag of ['cpu', 'memory']) {
    if (!QUANTITY.test(o[flag])) {
      throw bad(`--${flag} must be a Kubernetes quantity like 2, 500m or 2Gi (got '${o[flag]}')`)
    }
  }
  for (const flag of ['image', 'edge-image', 'app']) {
    const key = flag.replace(/-(.)/g, (_, c) => c.toUpperCase())
    if (UNSAFE_WORD.test(o[key])) {
      throw bad(`--${flag} must not contain spaces, quotes or backslashes (got '${o[key]}')`)
    }
  }
  if (o.port === o.agentPort) throw bad(`--port and --agent-port are both ${o.port}`)
  return o
}

// The whole stop, from the pod's deletion to its pool's exit at worst: the preStop sleep, then
// the pool's longest stop (as the systemd unit's, stopTimeoutSeconds, with 10 s to spare).
function terminationGraceSeconds (o) {
  return Math.ceil(o.preStop / 1000) + stopTimeoutSeconds(o)
}

function poolArgs (o) {
  const args = [o.app, '--host', '0.0.0.0', '--port', String(o.port), '--agent-port', String(o.agentPort), '--timeout',
    duration(o.timeout)]
  if (o.gracefulTimeout !== POOL_OPTIONS.gracefulTimeout.default) {
    args.push('--graceful-timeout', duration(o.gracefulTimeout))
  }
  if (o.killTimeout !== POOL_OPTIONS.killTimeout.default) args.push('--kill-timeout', duration(o.killTimeout))
  // The edge's pod address is not known here: its pod network is, and the app then sees the
  // client's address the edge passes on (X-Forwarded-For).
  args.push('--trust-proxy', o.trustProxy)
  return args
}

function labels (o, role) {
  return {
    'app.kubernetes.io/name': o.name,
    'app.kubernetes.io/component': role,
    'app.kubernetes.io/managed-by': 'pool-config'
  }
}

function poolDeployment (o) {
  const selector = labels(o, 'pool')
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: o.name, namespace: o.namespace, labels: selector },
    spec: {
      replicas: o.replicas,
      selector: { matchLabels: selector },
      // One pod at a time, and a new one ready before an old one goes: the fleet never loses
      // more than one pod's workers during a rollout.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template: {
        metadata: { labels: selector },
        spec: {
          terminationGracePeriodSeconds: terminationGraceSeconds(o),
          securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000 },
          containers: [{
            name: 'pool',
            image: o.image,
            args: poolArgs(o),
            ports: [
              { name: 'http', containerPort: o.port, protocol: 'TCP' },
              { name: 'agent', containerPort: o.agentPort, protocol: 'TCP' }
            ],
            env: [{ name: 'NODE_ENV', value: 'production' }],
            resources: { requests: { cpu: o.cpu, memory: o.memory }, limits: { cpu: o.cpu, memory: o.memory } },
            readinessProbe: {
              httpGet: { path: '/ping', port: 'http' },
              periodSeconds: 1,
              failureThreshold: 1,
              successThreshold: 1,
              timeoutSeconds: 1
            },
            lifecycle: { preStop: { exec: { command: ['sleep', String(Math.ceil(o.preStop / 1000))] } } },
            securityContext: {
              allowPrivilegeEscalation: false,
              readOnlyRootFilesystem: false,
              capabilities: { drop: ['ALL'] }
            }
          }]
        }
      }
    }
  }
}

function headlessService (o) {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: o.name, namespace: o.namespace, labels: labels(o, 'pool') },
    spec: {
      clusterIP: 'None',
      selector: labels(o, 'pool'),
      ports: [
        { name: 'http', port: o.port, targetPort: 'http', protocol: 'TCP' },
        { name: 'agent', port: o.agentPort, targetPort: 'agent', protocol: 'TCP' }
      ]
    }
  }
}

function srvName (o) {
  return `_http._tcp.${o.name}.${o.namespace}.svc.${o.clusterDomain}`
}

function edgeHaproxyConfig (o) {
  return edgeConfig({
    discover: srvName(o),
    agentPort: o.agentPort,
    maxHosts: o.maxHosts,
    timeout: o.timeout,
    host: '0.0.0.0',
    port: 8080,
    statsPort: 8999,
    log: 'stdout',
    prefix: '/tmp'
  })
}

function edgeConfigMap (o) {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: `${o.name}-edge`, namespace: o.namespace, labels: labels(o, 'edge') },
    data: { 'haproxy.cfg': edgeHaproxyConfig(o) }
  }
}

function edgeDeployment (o) {
  const selector = labels(o, 'edge')
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: `${o.name}-edge`, namespace: o.namespace, labels: selector },
    spec: {
      replicas: 1,
      selector: { matchLabels: selector },
      strategy: { type: 'Recreate' },
      template: {
        metadata: { labels: selector },
        spec: {
          containers: [{
            name: 'haproxy',
            image: o.edgeImage,
            ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
            readinessProbe: { tcpSocket: { port: 'http' }, periodSeconds: 2 },
            resources: { requests: { cpu: '500m', memory: '256Mi' }, limits: { memory: '512Mi' } },
            volumeMounts: [{ name: 'config', mountPath: '/usr/local/etc/haproxy', readOnly: true }],
            securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } }
          }],
          volumes: [{ name: 'config', configMap: { name: `${o.name}-edge` } }]
        }
      }
    }
  }
}

function edgeService (o) {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: `${o.name}-edge`, namespace: o.namespace, labels: labels(o, 'edge') },
    spec: {
      type: o.edgeServiceType,
      selector: labels(o, 'edge'),
      ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }]
    }
  }
}

// The objects, in the order `kubectl apply -f` should create them.
function kubernetesObjects (input = {}) {
  const o = resolveKubernetesOptions(input)
  return {
    options: o,
    objects: [headlessService(o), poolDeployment(o), edgeConfigMap(o), edgeDeployment(o), edgeService(o)]
  }
}

function kubernetesConfig (input = {}) {
  const { options: o, objects } = kubernetesObjects(input)
  const grace = terminationGraceSeconds(o)
  const header = [
    `# An elastic fleet of ${o.name} on Kubernetes, generated by \`pool config kubernetes\`. Apply: kubectl apply -f ` +
      'FILE',
    '#',
    `# ${o.name}: pods running \`pool start ${poolArgs(o).join(' ')}\``,
    `#   (the image's entrypoint). -n follows each pod's CPU limit (${o.cpu}), the worker ceiling its memory limit.`,
    '#   readinessProbe: GET /ping, answered by the pool\'s balancer itself (503 from the moment it stops);',
    '#   no livenessProbe: a busy pool still answers /ping, and restarting one under load only loses its',
    '#   renders; the kubelet restarts a pool whose process exits.',
    `#   preStop: sleep ${Math.ceil(o.preStop / 1000)} s, while the Service's endpoints (and DNS) drop the pod, then ` +
      'SIGTERM: the',
    '#   pool\'s agent says drain, its workers serve until the edge has heard, and it exits once its requests',
    `#   are done. terminationGracePeriodSeconds ${grace} = preStop + --graceful-timeout ` +
      `(${duration(o.gracefulTimeout)}) + 2 × --kill-timeout (${duration(o.killTimeout)}) + 12 s:`,
    '#   Kubernetes never SIGKILLs a pool that is still within its own deadlines.',
    `# ${o.name} (headless Service): DNS lists the ready pods, as A records and as SRV ${srvName(o)}.`,
    `# ${o.name}-edge: HAProxy (\`pool config edge --discover ${srvName(o)}\`) finds the pods by DNS, asks`,
    `#   each one's agent (port ${o.agentPort}) how many workers are free, and keeps one queue for the fleet; up ` +
      `to ${o.maxHosts} pods.`,
    '#   One replica: a second edge would split the queue (docs/guide/fleet.md, "Several edges").',
    ''
  ]
  return header.join('\n') + objects.map((object) => '---\n' + toYaml(object)).join('')
}

// YAML for plain data: maps, lists, strings (double-quoted as JSON when YAML could misread them,
// a literal block when they span lines), numbers and booleans.
function toYaml (value, indent = '') {
  if (Array.isArray(value)) {
    return value.map((item) => isScalar(item)
      ? `${indent}- ${scalar(item, indent + '  ')}\n`
      : `${indent}- ${toYaml(item, indent + '  ').slice(indent.length + 2)}`).join('')
  }
  return Object.entries(value).map(([key, v]) => {
    if (isScalar(v)) return `${indent}${key}: ${scalar(v, indent)}\n`
    if (Array.isArray(v) && v.length === 0) return `${indent}${key}: []\n`
    return `${indent}${key}:\n${toYaml(v, indent + '  ')}`
  }).join('')
}

function isScalar (v) {
  return v === null || typeof v !== 'object'
}

function scalar (v, indent) {
  if (typeof v !== 'string') return String(v)
  if (v.includes('\n')) {
    return '|\n' + v.replace(/\n$/, '').split('\n').map((line) => (line ? `${indent}  ${line}` : '')).join('\n')
  }
  return /^[A-Za-z0-9_./-][A-Za-z0-9_./:@-]*$/.test(v) &&
    !/^(true|false|yes|no|on|off|null|~|[-+]?[\d.]+([eE][-+]?\d+)?)$/i.test(v)
    ? v
    : JSON.stringify(v)
}

module.exports = {
  kubernetesConfig,
  kubernetesObjects,
  resolveKubernetesOptions,
  terminationGraceSeconds,
  toYaml,
  OPTIONS
}
