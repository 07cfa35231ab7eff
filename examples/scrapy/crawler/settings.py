BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
ROBOTSTXT_OBEY = True
CONCURRENT_REQUESTS = 16

# simdex: drop near-duplicate pages (python/README.md, "Scrapy")
DOWNLOADER_MIDDLEWARES = {"simdex.scrapy.NearDuplicateMiddleware": 540}  # below RetryMiddleware (550)
SIMDEX_INDEX = "crawl.simdex"
SIMDEX_K = 3
SIMDEX_MIN_WORDS = 20
