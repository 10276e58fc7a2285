"""Made-up APIs for the training bank: finance, travel, geometry and math, science (see ``toolkit.sft.bank``)."""

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

WORK: list[Fn] = [
    # finance
    Fn(
        "quote_share_price",
        "Returns the latest traded price of a listed company's shares, by ticker symbol.",
        {
            "ticker": text("Ticker symbol of the share, e.g. ORBT.", TICKERS),
            "exchange": choice(
                "Exchange to query; defaults to the primary listing.", ["NASDAQ", "NYSE", "LSE"], optional=True
            ),
        },
        [
            "What's {ticker} trading at right now?",
            "Get me the latest share price of {ticker}.",
            "How much is one {ticker} share on the {exchange}?",
        ],
        ["{ticker}现在股价是多少？", "帮我查一下{ticker}的最新股价。", "{ticker}在{exchange}的股价是多少？"],
        "finance",
    ),
    Fn(
        "fx_convert_amount",
        "Converts an amount of money from one currency to another at today's rate.",
        {
            "amount": number("Amount of money to convert.", 5, 5000, 2),
            "source_currency": choice("ISO code of the currency the amount is in.", CURRENCIES),
            "target_currency": choice("ISO code of the currency to convert to.", CURRENCIES),
        },
        [
            "Convert {amount} {source_currency} into {target_currency}.",
            "How many {target_currency} do I get for {amount} {source_currency}?",
        ],
        ["把{amount}{source_currency}换成{target_currency}。", "{amount}{source_currency}能换多少{target_currency}？"],
        "finance",
    ),
    Fn(
        "loan_monthly_installment",
        "Computes the fixed monthly payment of an amortised loan.",
        {
            "principal": integer("Amount borrowed.", 1000, 500000),
            "annual_rate_percent": number("Yearly interest rate in percent.", 1, 12, 2),
            "months": integer("Number of monthly payments.", 6, 360),
        },
        [
            "What's the monthly payment on a {principal} loan at {annual_rate_percent}% a year over {months} months?",
            "I borrow {principal} at {annual_rate_percent} percent annual interest for {months} months. Monthly installment?",
        ],
        ["贷款{principal}元，年利率{annual_rate_percent}%，分{months}个月还，每月还多少？"],
        "finance",
    ),
    Fn(
        "compound_growth_value",
        "Future value of a deposit that earns compound interest.",
        {
            "deposit": number("Starting amount.", 100, 20000, 0),
            "rate_percent": number("Interest per period in percent.", 0.5, 9, 1),
            "periods": integer("How many compounding periods.", 2, 40),
            "contribution": number("Amount added at the end of every period.", 10, 500, 0, optional=True),
        },
        [
            "If I put {deposit} in at {rate_percent}% per period for {periods} periods, what will it be worth?",
            "Future value of {deposit} growing at {rate_percent}% for {periods} periods, adding {contribution} each period?",
        ],
        [
            "{deposit}元按每期{rate_percent}%复利存{periods}期，最后有多少？",
            "本金{deposit}，每期利率{rate_percent}%，共{periods}期，每期再存{contribution}，终值是多少？",
        ],
        "finance",
    ),
    # travel
    Fn(
        "search_flight_offers",
        "Searches one-way flight offers between two airports on a date.",
        {
            "origin": choice("IATA code of the departure airport.", AIRPORTS),
            "destination": choice("IATA code of the arrival airport.", AIRPORTS),
            "date": text("Departure date, YYYY-MM-DD.", DATES),
            "cabin": choice(
                "Cabin class.",
                [
                    ("economy", "economy", "经济舱"),
                    ("business", "business", "商务舱"),
                    ("first", "first class", "头等舱"),
                ],
                optional=True,
            ),
            "passengers": integer("Number of travellers.", 1, 6, optional=True),
        },
        [
            "Find flights from {origin} to {destination} on {date}.",
            "Any {cabin} flights {origin} to {destination} on {date} for {passengers} people?",
            "I need to fly from {origin} to {destination} on {date}.",
        ],
        [
            "查一下{date}从{origin}飞{destination}的航班。",
            "{date}从{origin}到{destination}，{passengers}个人，{cabin}，有哪些航班？",
        ],
        "travel",
    ),
    Fn(
        "reserve_hotel_room",
        "Books a hotel room in a city for a stay.",
        {
            "city": text("City to stay in.", CITIES),
            "check_in": text("Arrival date, YYYY-MM-DD.", DATES),
            "nights": integer("Number of nights.", 1, 14),
            "guest": group(
                "Who the booking is for.",
                {"name": text("Full name.", PEOPLE), "adults": integer("Adults in the room.", 1, 4)},
                "{name} ({adults} adults)",
                "{name}（{adults}位成人）",
                optional=True,
            ),
        },
        [
            "Book a hotel in {city} from {check_in} for {nights} nights.",
            "Reserve a room in {city}, arriving {check_in}, {nights} nights, for {guest}.",
        ],
        [
            "帮我订{city}的酒店，{check_in}入住，住{nights}晚。",
            "在{city}订一间房，{check_in}入住{nights}晚，入住人{guest}。",
        ],
        "travel",
    ),
    Fn(
        "train_timetable_lookup",
        "Lists train departures between two stations.",
        {
            "from_station": text("Departure station.", CITIES),
            "to_station": text("Arrival station.", CITIES),
            "after": text(
                "Earliest departure time, HH:MM (24 h).", ["07:30", "09:00", "12:15", "16:40", "18:05"], optional=True
            ),
        },
        [
            "When are the trains from {from_station} to {to_station}?",
            "Trains {from_station} → {to_station} leaving after {after}?",
        ],
        ["从{from_station}到{to_station}有哪些火车？", "{after}以后从{from_station}去{to_station}的火车有哪些？"],
        "travel",
    ),
    Fn(
        "visa_requirement_check",
        "Says whether a citizen of one country needs a visa to visit another.",
        {
            "citizenship": text(
                "Country of the traveller's passport.",
                [
                    ("Brazil", "Brazil", "巴西"),
                    ("India", "India", "印度"),
                    ("Kenya", "Kenya", "肯尼亚"),
                    ("Canada", "Canada", "加拿大"),
                ],
            ),
            "destination_country": text(
                "Country to visit.",
                [
                    ("Japan", "Japan", "日本"),
                    ("Portugal", "Portugal", "葡萄牙"),
                    ("Peru", "Peru", "秘鲁"),
                    ("Egypt", "Egypt", "埃及"),
                ],
            ),
            "stay_days": integer("Planned length of stay in days.", 3, 90, optional=True),
        },
        [
            "Does a {citizenship} passport holder need a visa for {destination_country}?",
            "I'm from {citizenship}, going to {destination_country} for {stay_days} days. Visa needed?",
        ],
        [
            "{citizenship}护照去{destination_country}需要签证吗？",
            "我是{citizenship}人，要去{destination_country}待{stay_days}天，需要签证吗？",
        ],
        "travel",
    ),
    # geometry / math
    Fn(
        "regular_polygon_area",
        "Area of a regular polygon from its number of sides and side length.",
        {
            "sides": integer("Number of equal sides (3 or more).", 3, 12),
            "side_length": number("Length of one side.", 0.5, 40, 1),
        },
        [
            "Area of a regular polygon with {sides} sides of length {side_length}?",
            "What's the area of a regular {sides}-sided shape whose sides are {side_length} long?",
        ],
        ["边数为{sides}、边长{side_length}的正多边形面积是多少？"],
        "geometry",
    ),
    Fn(
        "cone_volume",
        "Volume of a right circular cone.",
        {
            "radius": number("Radius of the base.", 0.5, 30, 1),
            "height": number("Height of the cone.", 1, 50, 1),
            "unit": choice(
                "Length unit of the inputs.",
                [("cm", "cm", "厘米"), ("m", "m", "米"), ("in", "inches", "英寸")],
                optional=True,
            ),
        },
        [
            "Volume of a cone with radius {radius} and height {height}?",
            "A cone is {height} {unit} tall with a {radius} {unit} radius. Its volume?",
        ],
        [
            "底面半径{radius}、高{height}的圆锥体积是多少？",
            "一个圆锥高{height}{unit}，底面半径{radius}{unit}，体积多大？",
        ],
        "geometry",
    ),
    Fn(
        "gcd_of_integers",
        "Greatest common divisor of a list of whole numbers.",
        {"numbers": many("The whole numbers.", integer("A whole number.", 12, 999), 2, 4)},
        ["What's the greatest common divisor of {numbers}?", "Find the GCD of {numbers}."],
        ["{numbers}的最大公约数是多少？"],
        "math",
    ),
    Fn(
        "solve_quadratic_roots",
        "Real roots of a*x^2 + b*x + c = 0.",
        {
            "a": integer("Coefficient of x squared (not 0).", 1, 9),
            "b": integer("Coefficient of x.", -20, 20),
            "c": integer("Constant term.", -30, 30),
        },
        ["Solve {a}x^2 + {b}x + {c} = 0.", "Roots of the quadratic with a={a}, b={b}, c={c}?"],
        ["解方程 {a}x² + {b}x + {c} = 0。", "a={a}，b={b}，c={c}的二次方程的根是什么？"],
        "math",
    ),
    Fn(
        "binomial_probability",
        "Probability of exactly k successes in n independent trials.",
        {
            "trials": integer("Number of trials n.", 2, 50),
            "successes": integer("Number of successes k.", 0, 10),
            "p_success": number("Probability of success in one trial (0 to 1).", 0.05, 0.95, 2),
        },
        [
            "Chance of exactly {successes} successes in {trials} trials with p = {p_success}?",
            "Binomial probability: n={trials}, k={successes}, p={p_success}.",
        ],
        ["{trials}次试验、每次成功概率{p_success}，恰好成功{successes}次的概率是多少？"],
        "math",
    ),
    Fn(
        "integer_prime_decomposition",
        "Prime factorisation of a positive integer.",
        {"n": integer("The integer to factor (2 or more).", 12, 99999)},
        ["Factor {n} into primes.", "What are the prime factors of {n}?"],
        ["把{n}分解质因数。", "{n}的质因数有哪些？"],
        "math",
    ),
    # science
    Fn(
        "element_molar_mass",
        "Molar mass in g/mol of a chemical element by symbol.",
        {"symbol": choice("Element symbol.", ELEMENTS)},
        ["What's the molar mass of {symbol}?", "Molar mass of {symbol} please."],
        ["{symbol}的摩尔质量是多少？"],
        "chemistry",
    ),
    Fn(
        "ideal_gas_pressure",
        "Pressure of an ideal gas from moles, temperature and volume (PV = nRT).",
        {
            "moles": number("Amount of gas in mol.", 0.1, 10, 2),
            "temperature_k": number("Temperature in kelvin.", 200, 600, 0),
            "volume_l": number("Volume in litres.", 0.5, 50, 1),
        },
        [
            "Pressure of {moles} mol of gas at {temperature_k} K in {volume_l} L?",
            "Ideal gas: n={moles} mol, T={temperature_k} K, V={volume_l} L. What's P?",
        ],
        ["{moles}摩尔气体在{temperature_k}K、{volume_l}升体积下压强是多少？"],
        "physics",
    ),
    Fn(
        "projectile_range",
        "Horizontal range of a projectile launched on flat ground, no air resistance.",
        {
            "speed_m_s": number("Launch speed in m/s.", 2, 80, 1),
            "angle_deg": integer("Launch angle in degrees.", 5, 85),
            "gravity": number("Gravitational acceleration in m/s^2; Earth if omitted.", 1.6, 24.8, 1, optional=True),
        },
        [
            "How far does a ball go if thrown at {speed_m_s} m/s at {angle_deg} degrees?",
            "Range of a projectile: {speed_m_s} m/s, {angle_deg}°, g = {gravity}.",
        ],
        [
            "以{speed_m_s}米/秒、{angle_deg}度角抛出，水平射程多远？",
            "初速{speed_m_s}m/s，角度{angle_deg}°，重力加速度{gravity}，射程是多少？",
        ],
        "physics",
    ),
    Fn(
        "planet_fact_sheet",
        "Basic facts about a planet of the solar system.",
        {
            "planet": choice("Planet name.", PLANETS),
            "fields": many(
                "Which facts to return.",
                choice("A fact.", ["mass", "radius", "moons", "day_length"]),
                1,
                3,
                optional=True,
            ),
        },
        ["Tell me about {planet}.", "Give me the {fields} of {planet}."],
        ["介绍一下{planet}。", "告诉我{planet}的{fields}。"],
        "astronomy",
    ),
]
