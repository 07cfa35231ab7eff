BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
ROBOTSTXT_OBEY = True
CONCURRENT_REQUESTS = 16

# simdex (python/README.md, "Scrapy"): near-duplicate pages dropped, and no item twice across
# re-crawls; every value below is the library's default or the guide's
DOWNLOADER_MIDDLEWARES = {"simdex.scrapy.NearDuplicateMiddleware": 540}  # below RetryMiddleware (550)
ITEM_PIPELINES = {"simdex.scrapy.NearDuplicatePipeline": 300}  # a revisit's item is dropped, a changed page's passes
SIMDEX_INDEX = "crawl.simdex"  # kept across crawls
SIMDEX_MIN_WORDS = 20  # tinier pages are passed on, flagged, never stored
# SIMDEX_K unset: candidates within k = 8 (or sharing a sketch band) confirmed by sketch (resemblance >= 0.90), as simdex dedup
