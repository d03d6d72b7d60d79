'use strict'

// `pool config kubernetes` (lib/generate/kubernetes.js): the manifests of an elastic fleet. Each
// object is checked against the Kubernetes API's own schemas by kubernetes-models (required
// fields, types, enumerations: the OpenAPI schemas, compiled) and, since those let unknown
// fields through, against the API's TypeScript types (kubernetes-types) by the TypeScript
// compiler, whose excess-property check refuses a misspelt field. Both are devDependencies,
// nothing is fetched at test time. The edge's haproxy.cfg in the ConfigMap passes haproxy -c,
// and the pods' timeouts follow the pool's.

const t = require('tap')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const YAML = require('yaml')
const { Deployment } = require('kubernetes-models/apps/v1')
const { Service, ConfigMap } = require('kubernetes-models/v1')
const { kubernetesConfig, kubernetesObjects, terminationGraceSeconds } = require('../../lib/generate/kubernetes')
const { startTables } = require('../../lib/cli/start-flags')
const { runPool, ROOT, tempDir } = require('../helpers')
const { checkHaproxyConfig, onPlatforms } = require('../helpers/haproxy')

const MODELS = { Deployment, Service, ConfigMap }
const BASE = { image: 'registry.example/ssr:1.4.2', name: 'ssr', namespace: 'web' }

function documents (text) {
  return YAML.parseAllDocuments(text).map((d) => {
    t.same(d.errors, [], 'YAML without errors')
    return d.toJSON()
  }).filter(Boolean)
}

t.test('the YAML holds the objects, and each one passes the API\'s schema', async (t) => {
  for (const input of [BASE,
    {
      ...BASE,
      replicas: 10,
      cpu: '3500m',
      memory: '6Gi',
      gracefulTimeout: 90000,
      killTimeout: 10000,
      preStop: 10000,
      edgeServiceType: 'LoadBalancer',
      clusterDomain: 'k8s.internal'
    }]) {
    const docs = documents(kubernetesConfig(input))
    t.same(docs, JSON.parse(JSON.stringify(kubernetesObjects(input).objects)), 'the YAML reads back as the objects')
    t.same(docs.map((d) => `${d.kind}/${d.metadata.name}`),
      ['Service/ssr', 'Deployment/ssr', 'ConfigMap/ssr-edge', 'Deployment/ssr-edge', 'Service/ssr-edge'])
    for (const doc of docs) {
      t.doesNotThrow(() => new MODELS[doc.kind](doc).validate(), `${doc.kind}/${doc.metadata.name} is valid`)
    }
  }
  // The validator does refuse a broken object.
  const broken = kubernetesObjects(BASE).objects[1]
  broken.spec.replicas = 'three'
  t.throws(() => new Deployment(broken).validate(), /replicas must be integer/, 'a wrong type is refused')
})

t.test('no field the API does not know (TypeScript\'s excess-property check against kubernetes-types)', async (t) => {
  const dir = tempDir(t, 'pool-k8s-types-', { openToOthers: true })
  // The objects as generated, and once more with a field misspelt: one compiler run for both.
  const { objects } = kubernetesObjects(BASE)
  const typo = JSON.parse(JSON.stringify(objects))
  const container = typo[1].spec.template.spec.containers[0]
  container.readinessprobe = container.readinessProbe
  delete container.readinessProbe
  const source = (list) => [
    "import type { Deployment } from 'kubernetes-types/apps/v1'",
    "import type { Service, ConfigMap } from 'kubernetes-types/core/v1'",
    `export const objects: [Service, Deployment, ConfigMap, Deployment, Service] = ${JSON.stringify(list, null, 2)}`,
    ''
  ].join('\n')
  fs.writeFileSync(path.join(dir, 'generated.ts'), source(objects))
  fs.writeFileSync(path.join(dir, 'misspelt.ts'), source(typo))
  // Only kubernetes-types' declarations, found wherever this repository's node_modules is.
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true,
      noEmit: true,
      moduleResolution: 'node',
      types: [],
      baseUrl: '.',
      paths: { 'kubernetes-types/*': [path.join(ROOT, 'node_modules', 'kubernetes-types', '*')] }
    },
    files: ['generated.ts', 'misspelt.ts']
  }))
  const tsc = spawnSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir],
    { encoding: 'utf8', cwd: dir, timeout: 60000 })
  const errors = tsc.stdout.split('\n').filter((l) => /error TS/.test(l))
  t.same(errors.filter((l) => !l.startsWith('misspelt.ts')), [], 'tsc accepts the generated objects')
  t.ok(errors.some((l) => l.startsWith('misspelt.ts') && /readinessprobe/.test(l)),
    `and refuses a misspelt field: ${errors.join(' ')}`)
})

t.test('the pods: pool start with its agent, /ping as readiness, ' +
  'a grace period from the pool\'s timeouts', async (t) => {
  const input = { ...BASE, gracefulTimeout: 90000, killTimeout: 10000, preStop: 7000 }
  const { objects: [headless, pods, configMap, edge, edgeService] } = kubernetesObjects(input)
  const spec = pods.spec.template.spec
  const container = spec.containers[0]
  t.equal(spec.terminationGracePeriodSeconds, 7 + 90 + 2 * 10 + 2 + 10,
    'preStop + --graceful-timeout + 2 × --kill-timeout + 2 s, with 10 s to spare')
  t.equal(terminationGraceSeconds({ preStop: 5000, gracefulTimeout: 30000, killTimeout: 5000 }), 5 + 52,
    'the defaults: 57 s')
  t.same(container.lifecycle.preStop.exec.command, ['sleep', '7'])
  t.same(container.readinessProbe.httpGet, { path: '/ping', port: 'http' })
  t.notOk('livenessProbe' in container, 'no liveness probe: a busy pool must not be restarted')
  t.same(container.resources.limits, { cpu: '2', memory: '2Gi' }, 'limits: -n and the worker ceiling follow them')
  t.equal(spec.securityContext.runAsNonRoot, true)
  // Every flag the pod passes is one `pool start` knows.
  const flags = new Set(startTables().flatMap((table) => Object.values(table).map((s) => `--${s.flag}`)))
  const unknown = container.args.filter((a) => a.startsWith('--') && !flags.has(a))
  t.same(unknown, [], `pool start knows every flag: ${container.args.join(' ')}`)
  t.match(container.args.join(' '), /--agent-port 9100 .*--graceful-timeout 90s --kill-timeout 10s/)
  t.equal(headless.spec.clusterIP, 'None', 'a headless Service: DNS answers the ready pods')
  t.same(headless.spec.ports.map((p) => p.name), ['http', 'agent'],
    'the named port `http` makes the SRV record _http._tcp')
  t.same(edgeService.spec.selector, edge.spec.template.metadata.labels)
  t.same(headless.spec.selector, pods.spec.template.metadata.labels)

  const cfg = configMap.data['haproxy.cfg']
  t.match(cfg, /server-template host 1-32 _http\._tcp\.ssr\.web\.svc\.cluster\.local resolvers fleet_dns/,
    'the edge finds the pods by their SRV records')
  t.match(cfg, /agent-check agent-port 9100/)
  t.match(cfg, /^ {4}parse-resolv-conf$/m, 'through the pod\'s resolver (kube-dns)')
  const dir = tempDir(t, 'pool-k8s-', { openToOthers: true })
  fs.writeFileSync(path.join(dir, 'haproxy.cfg'), cfg)
  onPlatforms(t, 'haproxy -c accepts the edge\'s config', async (t, platform) => {
    const { ok, output } = checkHaproxyConfig(path.join(dir, 'haproxy.cfg'), { platform })
    t.ok(ok, output.trim().split('\n').pop())
  })
  t.equal(edge.spec.template.spec.volumes[0].configMap.name, configMap.metadata.name)
})

t.test('pool config kubernetes prints the YAML; bad input is one line and exit 2', async (t) => {
  const good = await runPool(['config', 'kubernetes', '--image', 'registry.example/ssr:1', '--name', 'ssr',
    '--replicas', '5'])
  t.equal(good.code, 0, good.stderr)
  t.equal(good.stdout, kubernetesConfig({ image: 'registry.example/ssr:1', name: 'ssr', replicas: 5 }))
  for (const [args, message] of [
    [[], /--image is required/],
    [['--image', 'x', '--name', 'Bad_Name'], /--name must be a DNS label/],
    [['--image', 'x', '--cpu', 'two'], /--cpu must be a Kubernetes quantity/],
    [['--image', 'x y'], /--image must not contain spaces/]
  ]) {
    const r = await runPool(['config', 'kubernetes', ...args])
    t.equal(r.code, 2, args.join(' '))
    t.equal(r.stderr.trim().split('\n').length, 1, r.stderr.trim())
    t.match(r.stderr, message)
  }
})
