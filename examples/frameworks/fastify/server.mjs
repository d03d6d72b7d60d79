// Fastify's getting-started server, as its docs write it (an ES module awaiting listen() at
// the top level), with the port from $PORT.
import Fastify from 'fastify'

const fastify = Fastify({
  logger: true
})

fastify.get('/', async function handler (request, reply) {
  return { hello: 'world' }
})

try {
  await fastify.listen({ port: process.env.PORT || 3000 })
} catch (err) {
  fastify.log.error(err)
  process.exit(1)
}
