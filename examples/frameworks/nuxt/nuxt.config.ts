// https://nuxt.com/docs/api/configuration/nuxt-config
export default defineNuxtConfig({
  compatibilityDate: '2025-07-15',
  devtools: { enabled: true },
  // Send the HTML shell at once and the rest of the page as it renders (off by default).
  experimental: { ssrStreaming: true }
})
