import { streamText, simulateReadableStream } from 'ai'
import { MockLanguageModelV4 } from 'ai/test'

// A chat route as the AI SDK's docs write one: streamText in a route handler, its text streamed
// to the client as the model sends it, and the request's signal passed on, so that a client that
// leaves stops the model's call (and what it costs). The model is the SDK's own test model, which
// streams `tokens` words one every `every` ms: no network, no key. It logs one JSON line when a
// stream is aborted, which the tests read.
export const dynamic = 'force-dynamic'

const USAGE = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 }
}

function testModel (tokens, every) {
  const words = Array.from({ length: tokens }, (_, i) => `word${i + 1} `)
  return new MockLanguageModelV4({
    doStream: async () => ({
      stream: simulateReadableStream({
        initialDelayInMs: every,
        chunkDelayInMs: every,
        chunks: [
          { type: 'text-start', id: 'text' },
          ...words.map((delta) => ({ type: 'text-delta', id: 'text', delta })),
          { type: 'text-end', id: 'text' },
          { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: USAGE }
        ]
      })
    })
  })
}

export async function POST (request) {
  const { prompt = 'Hello', tokens = 20, every = 50, id = null } = await request.json()
  const result = streamText({
    model: testModel(Math.min(Number(tokens) || 20, 100000), Math.max(Number(every) || 0, 1)),
    prompt,
    abortSignal: request.signal,
    onAbort: () => console.log(JSON.stringify({ event: 'chat-aborted', id, at: Date.now() }))
  })
  return result.toTextStreamResponse()
}
