"""Follows every link within the start URL's host; pages simdex drops are not followed."""

from urllib.parse import urlparse

import scrapy


class SiteSpider(scrapy.Spider):
    name = "site"

    def __init__(self, start: str = "http://127.0.0.1:8000/", **kwargs):
        super().__init__(**kwargs)
        self.start_url = start
        self.allowed_domains = [urlparse(start).hostname]

    async def start(self):
        yield scrapy.Request(self.start_url)

    def parse(self, response):
        yield {"url": response.url, "title": response.css("title::text").get(), "flags": response.flags}
        if hasattr(response, "css"):
            yield from response.follow_all(css="a::attr(href)")
