"""Made-up APIs for the training bank: health and food, calendar, files and home, media, shopping, housing, time,
language and environment (see ``toolkit.sft.bank``)."""

from __future__ import annotations

from toolkit.sft.slots import (  # noqa: F401
    AIRPORTS,
    BOOKS,
    CITIES,
    CURRENCIES,
    DATES,
    ELEMENTS,
    EMAILS,
    FILES,
    FOODS,
    GENRES,
    LANGS,
    PEOPLE,
    PLANETS,
    TEAMS,
    TICKERS,
    Fn,
    choice,
    flag,
    group,
    integer,
    many,
    number,
    text,
)

DAILY: list[Fn] = [
    # health / food
    Fn(
        "bmi_from_measurements",
        "Body-mass index from weight and height.",
        {
            "weight_kg": number("Weight in kilograms.", 35, 150, 1),
            "height_cm": integer("Height in centimetres.", 140, 210),
        },
        ["What's my BMI? I'm {height_cm} cm and weigh {weight_kg} kg.", "BMI for {weight_kg} kg at {height_cm} cm?"],
        ["我身高{height_cm}厘米，体重{weight_kg}公斤，BMI是多少？"],
        "health",
    ),
    Fn(
        "recipe_finder",
        "Finds recipes that use the given ingredients.",
        {
            "ingredients": many("Ingredients to use.", text("An ingredient.", FOODS), 1, 3),
            "max_minutes": integer("Longest total cooking time in minutes.", 10, 90, optional=True),
            "vegetarian": flag("Only vegetarian recipes."),
        },
        [
            "What can I cook with {ingredients}?",
            "Find a recipe with {ingredients} that takes under {max_minutes} minutes.",
            "Vegetarian recipes with {ingredients}, please.{vegetarian=true}",
        ],
        [
            "用{ingredients}能做什么菜？",
            "找一个用{ingredients}、{max_minutes}分钟内能做好的菜谱。",
            "有没有用{ingredients}的素食菜谱？{vegetarian=true}",
        ],
        "food",
    ),
    Fn(
        "nutrition_per_serving",
        "Calories and macronutrients of a food portion.",
        {"food": text("Food name.", FOODS), "grams": integer("Portion size in grams.", 20, 600)},
        ["How many calories are in {grams} g of {food}?", "Nutrition facts for {grams} grams of {food}."],
        ["{grams}克{food}有多少热量？"],
        "food",
    ),
    # calendar / communication
    Fn(
        "schedule_meeting",
        "Creates a calendar meeting with attendees.",
        {
            "title": text("Meeting title.", ["Budget review", "Sprint planning", "Design critique", "Quarterly sync"]),
            "date": text("Day of the meeting, YYYY-MM-DD.", DATES),
            "start_time": text("Start time, HH:MM (24 h).", ["09:00", "10:30", "13:00", "15:45"]),
            "attendees": many("Email addresses of the invitees.", text("An email address.", EMAILS), 1, 3),
            "duration_min": integer("Length in minutes.", 15, 120, optional=True),
        },
        [
            "Set up a '{title}' meeting on {date} at {start_time} with {attendees}.",
            "Schedule '{title}' for {duration_min} minutes on {date} at {start_time}; invite {attendees}.",
        ],
        [
            "{date} {start_time}安排一个“{title}”会议，邀请{attendees}。",
            "安排“{title}”，{date} {start_time}开始，{duration_min}分钟，参会人{attendees}。",
        ],
        "calendar",
    ),
    Fn(
        "send_text_message",
        "Sends a short text message to a phone number.",
        {
            "phone": text(
                "Recipient's phone number in international format.",
                ["+351912345678", "+254700111222", "+8613800138000", "+14165550199"],
            ),
            "message": text(
                "The message text.",
                [
                    ("Running 10 minutes late", "Running 10 minutes late", "我会晚到10分钟"),
                    ("Dinner at 7?", "Dinner at 7?", "7点吃晚饭？"),
                    ("Call me back", "Call me back", "回我电话"),
                ],
            ),
        },
        ['Text {phone}: "{message}".', 'Send "{message}" to {phone}.'],
        ["给{phone}发短信：“{message}”。"],
        "communication",
    ),
    Fn(
        "translate_sentence",
        "Translates text into another language.",
        {
            "text": text(
                "The text to translate.",
                [
                    ("Where is the station?", "Where is the station?", "车站在哪里？"),
                    ("Good morning, everyone", "Good morning, everyone", "大家早上好"),
                    ("The museum opens at nine", "The museum opens at nine", "博物馆九点开门"),
                ],
            ),
            "target_language": choice("ISO 639-1 code of the language to translate into.", LANGS),
            "formal": flag("Use the formal register."),
        },
        [
            'Translate "{text}" into {target_language}.',
            'How do I say "{text}" in {target_language}, formally?{formal=true}',
        ],
        ["把“{text}”翻译成{target_language}。", "“{text}”用{target_language}正式地怎么说？{formal=true}"],
        "language",
    ),
    # files / devices
    Fn(
        "share_file_link",
        "Creates a share link for a file in cloud storage.",
        {
            "path": text("Path of the file.", FILES),
            "expires_days": integer("Days until the link expires.", 1, 30, optional=True),
            "permission": choice(
                "What the recipient may do.", [("view", "view", "查看"), ("edit", "edit", "编辑")], optional=True
            ),
        },
        ["Make a share link for {path}.", "Share {path} with {permission} rights, link valid {expires_days} days."],
        ["给{path}生成一个分享链接。", "分享{path}，权限{permission}，链接{expires_days}天有效。"],
        "files",
    ),
    Fn(
        "thermostat_set_target",
        "Sets the target temperature of a smart thermostat in a room.",
        {
            "room": text(
                "Room name.",
                [("living room", "living room", "客厅"), ("bedroom", "bedroom", "卧室"), ("office", "office", "书房")],
            ),
            "celsius": number("Target temperature in °C.", 16, 27, 1),
            "mode": choice(
                "Heating or cooling mode.",
                [("heat", "heating", "制热"), ("cool", "cooling", "制冷"), ("auto", "auto", "自动")],
                optional=True,
            ),
        },
        ["Set the {room} to {celsius} degrees.", "Put the {room} thermostat on {mode} at {celsius}°C."],
        ["把{room}温度调到{celsius}度。", "{room}空调调成{mode}，{celsius}度。"],
        "home",
    ),
    # media / sports / books
    Fn(
        "playlist_generator",
        "Builds a music playlist of a genre and length.",
        {
            "genre": choice("Music genre.", GENRES),
            "tracks": integer("Number of songs.", 5, 40),
            "decade": choice("Decade the songs come from.", ["1960s", "1980s", "1990s", "2010s"], optional=True),
        },
        ["Make me a {genre} playlist with {tracks} songs.", "I want {tracks} {genre} tracks from the {decade}."],
        ["给我做一个{tracks}首歌的{genre}歌单。", "来{tracks}首{decade}的{genre}歌曲。"],
        "music",
    ),
    Fn(
        "league_table_position",
        "Current league position and points of a sports team.",
        {
            "team": text("Team name.", TEAMS),
            "season": text("Season, e.g. 2026-27.", ["2025-26", "2026-27"], optional=True),
        },
        ["Where are the {team} in the table?", "What was the {team}' league position in {season}?"],
        ["{team}现在排第几？", "{team}在{season}赛季排名第几？"],
        "sports",
    ),
    Fn(
        "library_book_availability",
        "Whether a library branch has a copy of a book available.",
        {
            "title": text("Book title.", BOOKS),
            "branch": text(
                "Library branch.",
                [
                    ("Central", "Central", "总馆"),
                    ("Eastside", "Eastside", "东区分馆"),
                    ("Harbor", "Harbor", "港口分馆"),
                ],
                optional=True,
            ),
        },
        ["Is {title} available at the library?", "Does the {branch} branch have {title} on the shelf?"],
        ["图书馆有{title}可以借吗？", "{branch}有没有{title}？"],
        "books",
    ),
    Fn(
        "cinema_schedule_for_film",
        "Showtimes of a film at cinemas in a city on a date.",
        {
            "film": text("Film title.", ["Glass Harbor", "Night Ferry", "The Ninth Orchard", "Paper Comets"]),
            "city": text("City.", CITIES),
            "date": text("Day, YYYY-MM-DD.", DATES, optional=True),
        },
        ["When is {film} playing in {city}?", "Showtimes for {film} in {city} on {date}?"],
        ["{film}在{city}什么时候放映？", "{date}{city}的{film}有哪些场次？"],
        "movies",
    ),
    # shopping / logistics
    Fn(
        "track_parcel_status",
        "Current status of a parcel by carrier and tracking number.",
        {
            "carrier": choice("Shipping company.", ["SwiftPost", "BlueCrate", "ParcelOwl"]),
            "tracking_number": text("Tracking number.", ["SP4471902", "BC88120457", "PO55031", "SP9008812"]),
        },
        ["Where is my {carrier} parcel {tracking_number}?", "Track {tracking_number} with {carrier}."],
        ["{carrier}的快递{tracking_number}到哪了？"],
        "logistics",
    ),
    Fn(
        "shipping_cost_quote",
        "Quotes the cost of shipping a box.",
        {
            "weight_kg": number("Weight of the box in kg.", 0.2, 30, 1),
            "dimensions_cm": group(
                "Box size in centimetres.",
                {
                    "length": integer("Length.", 10, 120),
                    "width": integer("Width.", 10, 80),
                    "height": integer("Height.", 5, 80),
                },
                "{length}×{width}×{height} cm",
                "{length}×{width}×{height}厘米",
            ),
            "destination_country": text(
                "Country it goes to.",
                [("Chile", "Chile", "智利"), ("Norway", "Norway", "挪威"), ("Vietnam", "Vietnam", "越南")],
            ),
            "express": flag("Express delivery."),
        },
        [
            "How much to ship a {weight_kg} kg box of {dimensions_cm} to {destination_country}?",
            "Express shipping quote: {weight_kg} kg, {dimensions_cm}, to {destination_country}.{express=true}",
        ],
        [
            "寄一个{weight_kg}公斤、{dimensions_cm}的箱子到{destination_country}要多少钱？",
            "加急寄{weight_kg}公斤、{dimensions_cm}的包裹去{destination_country}多少钱？{express=true}",
        ],
        "logistics",
    ),
    Fn(
        "product_price_compare",
        "Compares a product's price across online shops.",
        {
            "product": text(
                "Product name.",
                [
                    ("noise-cancelling headphones", "noise-cancelling headphones", "降噪耳机"),
                    ("espresso machine", "espresso machine", "意式咖啡机"),
                    ("e-reader", "e-reader", "电子书阅读器"),
                ],
            ),
            "max_price": integer("Highest price to include.", 50, 900, optional=True),
        },
        ["Compare prices for an {product}.", "Find the {product} under {max_price}."],
        ["比较一下{product}的价格。", "找{max_price}元以内的{product}。"],
        "shopping",
    ),
    # real estate / work / education
    Fn(
        "rent_estimate",
        "Estimated monthly rent for a flat in a city.",
        {
            "city": text("City.", CITIES),
            "bedrooms": integer("Number of bedrooms.", 1, 4),
            "furnished": flag("Furnished flat."),
        },
        [
            "What's typical rent for a {bedrooms}-bedroom flat in {city}?",
            "Rent for a furnished {bedrooms}-bedroom place in {city}?{furnished=true}",
        ],
        ["{city}{bedrooms}居室的房租大概多少？", "{city}带家具的{bedrooms}居室月租多少？{furnished=true}"],
        "real estate",
    ),
    Fn(
        "timezone_difference",
        "Hours between the local times of two cities.",
        {"city_a": text("First city.", CITIES), "city_b": text("Second city.", CITIES)},
        ["What's the time difference between {city_a} and {city_b}?", "How many hours ahead is {city_b} of {city_a}?"],
        ["{city_a}和{city_b}时差几个小时？"],
        "time",
    ),
    Fn(
        "count_workdays_between",
        "Working days between two dates (weekends excluded).",
        {
            "start_date": text("First day, YYYY-MM-DD.", DATES),
            "end_date": text("Last day, YYYY-MM-DD.", DATES),
            "country_holidays": text(
                "Country whose public holidays are skipped.",
                [("PT", "Portugal", "葡萄牙"), ("JP", "Japan", "日本"), ("KE", "Kenya", "肯尼亚")],
                optional=True,
            ),
        },
        [
            "How many working days are there from {start_date} to {end_date}?",
            "Workdays between {start_date} and {end_date}, skipping {country_holidays} holidays?",
        ],
        [
            "{start_date}到{end_date}之间有几个工作日？",
            "{start_date}到{end_date}，除去{country_holidays}的节假日，有多少工作日？",
        ],
        "time",
    ),
    Fn(
        "grade_average",
        "Weighted average of a student's marks.",
        {
            "scores": many("The marks.", integer("A mark.", 40, 100), 2, 4),
            "weights": many("Weight of each mark, in the same order.", integer("A weight.", 1, 5), 2, 4, optional=True),
        },
        ["What's the average of the marks {scores}?", "Average my grades {scores} with weights {weights}."],
        ["成绩{scores}的平均分是多少？", "成绩{scores}，权重{weights}，加权平均是多少？"],
        "education",
    ),
    Fn(
        "word_definition",
        "Dictionary definition of an English word.",
        {
            "word": text("The word.", ["serendipity", "ephemeral", "laconic", "quixotic", "gregarious"]),
            "include_examples": flag("Also return example sentences."),
        },
        ["What does '{word}' mean?", "Define '{word}' with example sentences.{include_examples=true}"],
        ["“{word}”是什么意思？", "解释一下“{word}”，并给出例句。{include_examples=true}"],
        "language",
    ),
    Fn(
        "air_quality_index",
        "Current air-quality index of a city.",
        {
            "city": text("City.", CITIES),
            "pollutant": choice(
                "Which pollutant to report.",
                [("pm25", "PM2.5", "PM2.5"), ("pm10", "PM10", "PM10"), ("o3", "ozone", "臭氧")],
                optional=True,
            ),
        },
        ["How's the air quality in {city}?", "What's the {pollutant} level in {city} today?"],
        ["{city}空气质量怎么样？", "{city}今天{pollutant}是多少？"],
        "environment",
    ),
    Fn(
        "sunrise_sunset_times",
        "Sunrise and sunset times in a city on a date.",
        {"city": text("City.", CITIES), "date": text("Day, YYYY-MM-DD.", DATES)},
        ["When does the sun rise and set in {city} on {date}?", "Sunrise/sunset for {city}, {date}."],
        ["{date}{city}几点日出、几点日落？"],
        "environment",
    ),
    Fn(
        "parking_spot_finder",
        "Free parking spots near an address.",
        {
            "address": text(
                "Street address.", ["12 Harbour Road", "88 Maple Avenue", "5 Station Square", "230 King Street"]
            ),
            "radius_m": integer("Search radius in metres.", 100, 2000, optional=True),
            "ev_charging": flag("Only spots with EV charging."),
        },
        [
            "Find parking near {address}.",
            "Any parking with EV charging within {radius_m} m of {address}?{ev_charging=true}",
        ],
        ["{address}附近有停车位吗？", "{address}周围{radius_m}米内有带充电桩的车位吗？{ev_charging=true}"],
        "transport",
    ),
]
