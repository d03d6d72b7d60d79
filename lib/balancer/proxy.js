'use strict'

// One attempt to forward a buffered request to one worker, over the worker's keep-alive agent.
// It reads the response whole when it fits in `maxResponseBuffer`, so the worker is free the
// moment it has answered, however slowly the client reads. The outcome says how far the attempt
// got, which is what decides whether it may be retried:
//
//   { type: 'complete', res, body }   the whole response, in memory
//   { type: 'overflow', res, chunks } the response outgrew the buffer; `res` is paused after
//                                     `chunks` and must be streamed (the worker stays taken)
//   { type: 'error', stage, error }   stage 'connect': the request was not written (refused,
//                                     reset while connecting): safe to send elsewhere.
//                                     stage 'sent': written, no response byte came back.
//                                     stage 'response': the response broke off midway.
//                                     stage 'timeout': no answer within proxyTimeout.

const http = require('node:http')

class ProxyTimeout extends Error {
  constructor (ms) { super(`no answer within ${ms} ms`); this.code = 'PROXY_TIMEOUT' }
}

function forward ({ method, url, headers, body }, record, { maxResponseBuffer, proxyTimeout }) {
  return new Promise((resolve) => {
    let settled = false
    let written = false
    let responded = false
    let timedOut = false
    const settle = (outcome) => {
      if (settled) return
      settled = true
      resolve(outcome)
    }
    const upstream = http.request({
      host: record.host,
      port: record.port,
      method,
      path: url,
      headers,
      agent: record.agent
    })
    record.upstreams.add(upstream)
    upstream.on('close', () => record.upstreams.delete(upstream))
    upstream.on('finish', () => { written = true })
    upstream.on('error', (error) => {
      const stage = timedOut ? 'timeout' : responded ? 'response' : written ? 'sent' : 'connect'
      settle({ type: 'error', stage, error })
    })
    if (proxyTimeout > 0) {
      upstream.setTimeout(proxyTimeout, () => {
        if (responded) return
        timedOut = true
        upstream.destroy(new ProxyTimeout(proxyTimeout))
      })
    }
    upstream.on('response', (res) => {
      responded = true
      if (proxyTimeout > 0) upstream.setTimeout(0)
      collect(res, maxResponseBuffer, settle)
    })
    upstream.end(body || undefined)
  })
}

function collect (res, limit, settle) {
  const chunks = []
  let size = 0
  const onData = (chunk) => {
    size += chunk.length
    chunks.push(chunk)
    if (size > limit) {
      res.pause()
      res.removeListener('data', onData)
      res.removeListener('end', onEnd)
      settle({ type: 'overflow', res, chunks })
    }
  }
  const onEnd = () => {
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)
    settle({ type: 'complete', res, body })
  }
  res.on('data', onData)
  res.on('end', onEnd)
  res.on('error', (error) => settle({ type: 'error', stage: 'response', error }))
  res.on('aborted', () => settle({ type: 'error', stage: 'response', error: new Error('response aborted') }))
}

module.exports = { forward, ProxyTimeout }
