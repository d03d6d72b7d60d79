const t=require('tap');const net=require('net');const path=require('path')
const { HaproxyClient } = require('../lib/haproxy/client')
const { tempDir } = require('./helpers/haproxy')
t.test('x',async t=>{
  const dir = tempDir(t)
  const socket = path.join(dir, 'silent.sock')
  const silent = net.createServer((s) => s.on('error', () => {}))
  await new Promise((resolve) => silent.listen(socket, resolve))
  t.teardown(() => new Promise((resolve) => { silent.close((e)=>{console.log('closecb',e);resolve()}) }))
  const client = new HaproxyClient({ socket, timeout: 200 })
  try { await client.level() } catch (e) { console.log(e.code) }
  t.pass()
})
