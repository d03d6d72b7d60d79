// `NEXT_OUTPUT=standalone next build` also writes .next/standalone/: a server.js with only the
// files it needs, to copy to a host or an image.
module.exports = {
  output: process.env.NEXT_OUTPUT
}
