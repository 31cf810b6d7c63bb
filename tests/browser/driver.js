// driver.js: the two browsers the page tests run in, behind one small page
// interface, so that a test is written once: Debian's Chromium through
// playwright-core, Debian's firefox-esr through puppeteer-core over WebDriver
// BiDi. Neither downloads a browser. The interface reads and writes the page
// by selector; form fields are filled as the page sees a user do it (value,
// then an input or change event), and only when they are visible.
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

export const BROWSERS = ['chromium', 'firefox'];

/** Starts a browser: { name, version, newPage({ width, height }), close() }. */
export async function launch(name) {
  if (name === 'chromium') {
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium', headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
    });
    return {
      name, version: `Chromium ${browser.version()}`,
      async newPage(viewport) {
        const context = await browser.newContext({ viewport });
        return new Page(name, await context.newPage(), context);
      },
      close: () => browser.close(),
    };
  }
  if (name === 'firefox') {
    const browser = await puppeteer.launch({
      browser: 'firefox', protocol: 'webDriverBiDi', executablePath: '/usr/bin/firefox-esr', headless: true,
    });
    return {
      name, version: (await browser.version()).replace(/^firefox\//i, 'Firefox '),
      async newPage(viewport) {
        const context = await browser.createBrowserContext(); // its own caches and service workers
        const page = await context.newPage();
        await page.setViewport(viewport);
        return new Page(name, page, context);
      },
      close: () => browser.close(),
    };
  }
  throw new Error(`no driver for the browser "${name}"`);
}

/** Writes a value into a visible field and tells the page, as typing would. */
function fillField([selector, value, event]) {
  const field = document.querySelector(selector);
  if (!field?.checkVisibility()) throw new Error(`${selector} is not visible`);
  field.value = value;
  field.dispatchEvent(new Event(event, { bubbles: true }));
}

class Page {
  constructor(browser, raw, context) {
    this.browser = browser;
    this.raw = raw; // the playwright or puppeteer page, for what only one of them has
    this.context = context;
    this.errors = []; // uncaught errors of the page
    this.uploads = []; // folders of the files upload() picked
    raw.on('pageerror', (error) => this.errors.push(error.message));
  }

  get isChromium() { return this.browser === 'chromium'; }

  /** Runs fn before any script of every document the page opens. */
  beforeLoad(fn) {
    return this.isChromium ? this.raw.addInitScript(fn) : this.raw.evaluateOnNewDocument(fn);
  }

  goto(url) { return this.raw.goto(url); }
  reload() { return this.raw.reload(); }
  evaluate(fn, arg) { return this.raw.evaluate(fn, arg); }

  /** Waits until fn(arg) is truthy in the page; rejects after timeout ms. */
  waitFor(fn, arg, timeout = 30000) {
    return this.isChromium ? this.raw.waitForFunction(fn, arg, { timeout, polling: 100 })
      : this.raw.waitForFunction(fn, { timeout, polling: 100 }, arg);
  }

  /** Waits until an element matches selector. */
  waitForSelector(selector, timeout = 30000) {
    return this.waitFor((s) => !!document.querySelector(s), selector, timeout);
  }

  text(selector) { return this.evaluate((s) => document.querySelector(s).textContent, selector); }
  value(selector) { return this.evaluate((s) => document.querySelector(s).value, selector); }
  attribute(selector, name) { return this.evaluate(([s, n]) => document.querySelector(s).getAttribute(n), [selector, name]); }
  count(selector) { return this.evaluate((s) => document.querySelectorAll(s).length, selector); }
  visible(selector) { return this.evaluate((s) => !!document.querySelector(s)?.checkVisibility(), selector); }
  enabled(selector) { return this.evaluate((s) => !document.querySelector(s).disabled, selector); }
  focused() { return this.evaluate(() => document.activeElement?.id ?? null); }
  /** { x, y, width, height } of an element, in CSS pixels from the viewport's top left. */
  box(selector) { return this.evaluate((s) => document.querySelector(s).getBoundingClientRect().toJSON(), selector); }

  fill(selector, value) { return this.evaluate(fillField, [selector, String(value), 'input']); }
  select(selector, value) { return this.evaluate(fillField, [selector, value, 'change']); }
  click(selector) { return this.raw.click(selector); }

  /** Picks a file { name, buffer } in a file input, as the file chooser would. */
  async upload(selector, { name, mimeType, buffer }) {
    if (this.isChromium) return this.raw.setInputFiles(selector, { name, mimeType, buffer });
    // Firefox reads a picked file when the page does: it stays until close().
    const dir = mkdtempSync(join(tmpdir(), 'needle-upload-'));
    this.uploads.push(dir);
    writeFileSync(join(dir, name), buffer);
    await (await this.raw.$(selector)).uploadFile(join(dir, name));
  }

  viewport(width, height) {
    return this.isChromium ? this.raw.setViewportSize({ width, height }) : this.raw.setViewport({ width, height });
  }

  screenshot(path, fullPage = true) { return this.raw.screenshot({ path, fullPage }); }

  /** Cuts the page's network off (or back on), as the browser's offline mode does. */
  setOffline(offline) {
    return this.isChromium ? this.context.setOffline(offline) : this.raw.setOfflineMode(offline);
  }

  async close() {
    await this.context.close();
    for (const dir of this.uploads) rmSync(dir, { recursive: true, force: true });
  }
}
