'use strict'

// Every process the bench starts is registered here and killed on the way out, whatever
// happens (normal end, error, Ctrl-C).

const os = require('node:os')
const net = require('node:net')
const path = require('node:path')
const { fork, spawn } = require('node:child_process')
// The same consecutive-free-ports finder the tests use.
const { freePorts } = require('../../test/helpers')

const children = new Set()

function track (child) {
  children.add(child)
  child.exited = new Promise((resolve) => child.once('exit', resolve))
  child.exited.then(() => children.delete(child))
  return child
}

// Fork a bench script and wait for its { ready: true } message.
function forkReady (script, env, { timeout = 20000 } = {}) {
  const child = track(fork(path.join(__dirname, script), [], { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }))
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${script} not ready within ${timeout} ms`)), timeout)
    const onMessage = (m) => {
      if (!m || !m.ready) return
      clearTimeout(t)
      child.removeListener('message', onMessage)
      resolve(child)
    }
    child.on('message', onMessage)
    child.once('exit', (code) => { clearTimeout(t); reject(new Error(`${script} exited (${code}) before ready`)) })
  })
}

function spawnTracked (cmd, args, opts) {
  return track(spawn(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], ...opts }))
}

// SIGKILL, unless the child names a gentler `stopSignal` because it must end children of its
// own first (nginx's master its workers): then that, and SIGKILL after 5 s.
async function stop (child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return
  child.kill(child.stopSignal || 'SIGKILL')
  const timer = child.stopSignal ? setTimeout(() => child.kill('SIGKILL'), 5000) : null
  await child.exited
  clearTimeout(timer)
}

// Cleanups for what is not a child of ours: a daemon (PM2's) that outlives the command that
// started it. stopAll() runs each once.
const cleanups = new Set()

function onStopAll (fn) {
  cleanups.add(fn)
  return () => cleanups.delete(fn)
}

async function stopAll () {
  const pending = [...cleanups]
  cleanups.clear()
  await Promise.allSettled(pending.map((fn) => fn()))
  await Promise.all([...children].map(stop))
}

function waitForPort (port, { timeout = 10000 } = {}) {
  const deadline = Date.now() + timeout
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const s = net.connect(port, '127.0.0.1')
      s.once('connect', () => { s.destroy(); resolve() })
      s.once('error', () => {
        if (Date.now() > deadline) return reject(new Error(`nothing listens on ${port} after ${timeout} ms`))
        setTimeout(attempt, 50)
      })
    }
    attempt()
  })
}

// A request to a forked helper (load.js, a front) and its answer: { cmd, ... } → m.result.
function ask (child, message) {
  return new Promise((resolve) => {
    child.once('message', (m) => resolve(m.result))
    child.send(message)
  })
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const loadavg = () => os.loadavg().map((l) => l.toFixed(2)).join(' ')

module.exports = { forkReady, spawnTracked, stop, stopAll, onStopAll, freePorts, waitForPort, ask, sleep, loadavg }
