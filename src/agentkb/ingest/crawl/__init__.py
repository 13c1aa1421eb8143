"""The web crawler: `crawler` runs a crawl, `fetch` fetches politely and safely, `extract` turns HTML into
text, `urls` canonicalises and filters links, `source` feeds crawled pages into a KB insert."""
