// Package web tests sluice's status page in a real browser: headless
// Chromium (Debian's chromium, driven with chromedp) loads the page from
// an in-process sluice in front of a sandbox topology of its own, and the
// page's JSON API is checked against the admin port's SHOW result sets.
package web
