#!/usr/bin/env python3
"""Seeded synthetic data generator for the small tool-calling model.

Standard library only. Reads the tool catalogue from ../../web/tools.json.

  python3 src/train/generate.py --seed 1 --train 60000 --heldout 600 --out DIR
  python3 src/train/generate.py --corpus FILE

Each example is one JSON line:
  {"split", "template", "kind", "system", "tools", "turns": [...]}
kind is one of call | multi | refusal | followup; a training conversation
may go on with later requests (generate's `later`).

Held-out split: whole templates (index % 5 == 3 inside each tool's template list,
about 20%) and whole values (index % 5 == 2 inside each value pool, about 20%) are
reserved for held-out examples; train examples never use them.

train-templates.json adds more phrasings per tool to the training split only.
They were written later, by writers who were not shown the held-out templates,
so the held-out split is the same as before they came.
"""
import argparse
import functools
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS_PATH = os.path.join(HERE, "..", "..", "web", "tools.json")
TRAIN_TEMPLATES_PATH = os.path.join(HERE, "train-templates.json")

# Training shares (the rest: call). The held-out commands keep the shares
# they were drawn with, so that they stay comparable across models, and
# small talk is held out apart (HELDOUT_CHATTER).
KIND_SHARES = (("multi", 0.14), ("refusal", 0.11), ("followup", 0.08), ("chatter", 0.06))
HELDOUT_SHARES = (("multi", 0.10), ("refusal", 0.12), ("followup", 0.08))
HELDOUT_CHATTER = 100
CHATTER_LATER = 0.10  # later requests of a conversation that are small talk
SYSTEM_SHARE = 0.40


def L(text):
    """A pool written one item per line."""
    out = [s.strip() for s in text.strip().split("\n")]
    return [s for s in out if s]


# ---------------------------------------------------------------------------
# Value pools (all written here; nothing from outside the project)
# ---------------------------------------------------------------------------

POOLS = {}

POOLS["person"] = L("""
Anna
Ben
Carlos
Diana
Ethan
Fatima
George
Hannah
Ivan
Julia
Kevin
Laura
Marcus
Nina
Oliver
Priya
Quinn
Rachel
Samuel
Tara
Umar
Valerie
William
Xavier
Yasmin
Zoe
Aisha
Brandon
Chloe
Daniel
Elena
Felix
Grace
Hugo
Isabel
Jack
Kira
Liam
Maya
Noah
Olivia
Pablo
Rosa
Sophie
Theo
Uma
Victor
Wendy
Yuki
Zach
Amir
Bella
Colin
Dev
Emma
Finn
Gabriel
Holly
Ian
Jasmine
Kofi
Lucy
Mateo
Nora
Omar
Paula
Ravi
Sara
Tom
Vera
Mom
Dad
Grandma
Grandpa
Aunt Linda
Uncle Joe
Dr. Patel
Coach Miller
Sarah Johnson
Mike Chen
Lena Fischer
Jonas
Mia
Ahmed
Chiara
Mr. Okafor
""")

POOLS["city"] = L("""
Paris
London
Berlin
Madrid
Rome
Lisbon
Dublin
Amsterdam
Brussels
Vienna
Prague
Warsaw
Budapest
Athens
Oslo
Stockholm
Helsinki
Copenhagen
Zurich
Geneva
Munich
Hamburg
Barcelona
Seville
Milan
Naples
Edinburgh
Glasgow
Manchester
Liverpool
New York
Los Angeles
Chicago
Houston
Phoenix
Seattle
Denver
Boston
Miami
Atlanta
San Francisco
Austin
Portland
Toronto
Vancouver
Montreal
Mexico City
Bogota
Lima
Santiago
Buenos Aires
Sao Paulo
Rio de Janeiro
Cairo
Nairobi
Lagos
Cape Town
Casablanca
Istanbul
Dubai
Mumbai
Delhi
Bangalore
Bangkok
Singapore
Jakarta
Manila
Hanoi
Seoul
Tokyo
Osaka
Beijing
Shanghai
Hong Kong
Sydney
Melbourne
Auckland
Reykjavik
Krakow
Marseille
""")

POOLS["room"] = L("""
kitchen
living room
bedroom
bathroom
hallway
office
garage
basement
attic
dining room
guest room
kids room
nursery
study
den
porch
patio
laundry room
master bedroom
upstairs bathroom
downstairs bathroom
playroom
garden
balcony
closet
pantry
entryway
family room
library
workshop
sunroom
home office
loft
gym
back porch
utility room
""")

POOLS["genre"] = L("""
jazz
classical music
lo-fi beats
hip hop
rock
country
reggae
blues
techno
house music
80s pop
90s hits
soul
funk
ambient music
piano music
bossa nova
heavy metal
punk rock
indie folk
k-pop
salsa
disco
smooth jazz
opera
gospel
chill music
study music
workout music
christmas songs
rainy day music
acoustic covers
movie soundtracks
""")

POOLS["artist"] = L("""
Taylor Swift
the Beatles
Beyonce
Miles Davis
Adele
Coldplay
Ed Sheeran
Bob Marley
Daft Punk
Queen
Nina Simone
Fleetwood Mac
Kendrick Lamar
Billie Eilish
Radiohead
ABBA
Stevie Wonder
Dua Lipa
Johnny Cash
Norah Jones
Bruno Mars
Arctic Monkeys
Ella Fitzgerald
the Rolling Stones
Drake
Shakira
Elton John
Louis Armstrong
Frank Sinatra
Bach
Mozart
Chopin
Pink Floyd
Nirvana
Lady Gaga
Rihanna
Bon Iver
Aretha Franklin
Whitney Houston
Metallica
the Weeknd
Harry Styles
Lizzo
Hans Zimmer
Ludovico Einaudi
Olivia Rodrigo
""")

POOLS["song"] = L("""
Bohemian Rhapsody
Hey Jude
Kind of Blue
Abbey Road
Thriller
Purple Rain
Rumours
Clair de Lune
the Four Seasons
Imagine
Hotel California
Wonderwall
Blinding Lights
Dancing Queen
Yellow Submarine
Take Five
Let It Be
Billie Jean
Shape of You
Rolling in the Deep
Bad Guy
Space Oddity
Stairway to Heaven
Sweet Caroline
Africa
Respect
Superstition
Fly Me to the Moon
Moonlight Sonata
Here Comes the Sun
What a Wonderful World
""")

POOLS["msg"] = L("""
I'm running ten minutes late
dinner is ready
can you pick up milk on the way home
see you at the station
happy birthday
I'll call you back later
the meeting moved to Thursday
don't forget your keys
I'm on my way
running late, start without me
call me when you land
the kids are asleep
thanks for yesterday
I left the car at the garage
let's grab lunch tomorrow
I'm outside
the package arrived
good luck with the interview
can we reschedule to next week
I'll be home by eight
bring a jacket, it's cold
the door code is on the fridge
I miss you
have a safe flight
I'm stuck in traffic
see you at the game
movie starts at seven
please feed the cat
I finished the report
where are you
meet me at the front entrance
the train is delayed
I got the tickets
love you
don't wait up
lunch is on me today
I'll be there in five
can you send me the address
we need more coffee
practice is cancelled
the plumber is coming at noon
thanks for the flowers
I'll bring dessert
the wifi is down again
check your email
I'm at the pharmacy
your package is at the neighbor's
sleep well
the party starts at nine
can you water the plants
I booked the table
I parked on level two
congrats on the new job
I'll pick the kids up today
my phone is almost dead
I can't make it tonight
the car is ready
let me know when you're free
heading to the gym
I'm proud of you
save me a seat
we're out of bread
the vet appointment went fine
text me when you get home
I'll be working late tonight
ok sounds good
""")

POOLS["note"] = L("""
the wifi password is on the back of the router
parking spot is level 3 row B
ideas for the garden: more tulips by the fence
Tom's shoe size is 43
the boiler was serviced in March
call the bank about the card
gate code is 4417
the blue folder has the tax papers
meeting notes: budget approved
book idea about a lighthouse keeper
the spare key is under the flower pot
Lisa likes white roses
check the tire pressure next week
the recipe needs two cups of flour
passport expires in October
dentist said to floss more
the landlord's number is in my email
remember the dog's vet appointment
gift idea for Dad: a new fishing rod
the printer needs a new cartridge
the kids' school play is on the 14th
try the new ramen place downtown
water meter reading is 20431
my locker number is 112
the train leaves from platform 9
podcast episode about sleep was great
cancel the gym membership before June
the paint color is Harbor Blue
Grandma's birthday is in May
the wifi at the office is Guest5G
renew the car insurance in August
the blender warranty lasts two years
my seat is 14C
the code for the bike lock is 0291
Sam owes me twenty dollars
change the air filter every three months
the hotel confirmation number is XK4821
idea: a weekly family movie night
the soup needs more salt next time
the electrician charges by the hour
ask about the refund on Monday
the neighbors are away until Sunday
my blood type is O positive
I parked near the north exit
fix the squeaky door hinge
the quote for the roof was too high
lunch with the team went well
the plant needs water every Tuesday
the password hint is my first car
back up the laptop this weekend
the bus pass expires Friday
the new project kickoff is in two weeks
Mia's favorite cake is lemon
the tent is in the garage loft
the invoice number is 7781
next time order the small size
the movie Ana recommended is about chess
the car needs an oil change soon
my library books are due on the 3rd
the heating makes a noise at night
keep receipts for the repairs
the shelf measures 80 by 30
the conference room is on floor five
the lawn mower blade is dull
Leo is allergic to peanuts
the bike tire keeps going flat
the cabin check-in is after four
""")

POOLS["q"] = L("""
best hiking trails near Denver
how to fix a leaky faucet
history of the Eiffel Tower
vegan lasagna recipe
how long to boil an egg
opening hours of the city museum
symptoms of the flu
how to tie a bow tie
best budget laptops this year
who invented the telephone
how to remove coffee stains
easy houseplants for beginners
how to change a bike tire
population of Canada
best pizza dough recipe
how to get rid of fruit flies
when is the next full moon
how do solar panels work
cheap weekend trips from Chicago
how to train a puppy
healthy breakfast ideas
how to clean a cast iron pan
tallest buildings in the world
how to start a vegetable garden
what is a black hole
best board games for families
how to write a cover letter
how to unclog a drain
ancient Roman aqueducts
how to make cold brew coffee
how many moons does Jupiter have
beginner yoga poses
how to fold a fitted sheet
best sci-fi novels
how to grow tomatoes on a balcony
causes of the French Revolution
how to sharpen a kitchen knife
local farmers markets
how to learn to juggle
what do otters eat
how to replace a light switch
best running shoes for flat feet
how to make sourdough starter
rules of cricket
how to reduce screen time
when was the printing press invented
how to repot an orchid
easy card tricks
best places to see the northern lights
how to remove a splinter
how to paint a room
difference between a crocodile and an alligator
how to meditate
how to make pancakes without eggs
famous paintings by Van Gogh
how to jump start a car
best museums in Europe
how do vaccines work
how to stop a dog from barking
origin of Halloween
how to knit a scarf
how to lower my electricity bill
why is the sky blue
how to make a paper airplane
great podcasts about history
how to build a birdhouse
what is the speed of sound
how to care for a succulent
tips for a job interview
how to descale a kettle
""")

POOLS["title"] = L("""
dentist appointment
lunch with Sarah
team meeting
yoga class
parent teacher conference
dinner with the Garcias
haircut
car service
book club
soccer practice
doctor's appointment
coffee with Mark
project review
piano lesson
date night
job interview
birthday party
vet appointment
flight to Boston
quarterly planning
swim lesson
movie night
family barbecue
budget review
gym session
call with the landlord
school pickup
guitar lesson
client presentation
wedding rehearsal
farmers market trip
study group
eye exam
anniversary dinner
board meeting
tennis with Alex
volunteer shift
baby shower
oil change
cooking class
one on one with my manager
physio session
brunch with Emma
house viewing
concert
tax appointment
art class
team lunch
therapy session
garage sale
dance recital
podcast recording
beach day
sprint planning
museum visit
camping trip
hair appointment
french lesson
football game
charity run
parents' evening
grocery pickup
drinks with Leo
mechanic appointment
photo shoot
karaoke night
dog grooming
hospital visit
library volunteering
chess club
""")

POOLS["eday"] = L("""
|tomorrow
|today
|tonight
on |Monday
on |Tuesday
on |Wednesday
on |Thursday
on |Friday
on |Saturday
on |Sunday
|next Monday
|next Tuesday
|next Wednesday
|next Thursday
|next Friday
|next Saturday
|this Friday
|this Saturday
|this Sunday
|this Wednesday
on |March 3rd
on |June 12th
on |the 21st
on |the 5th
on |May 1st
on |October 30th
on |December 24th
|the day after tomorrow
on |the 14th
on |July 4th
on |February 9th
|next week
|Friday morning
on |the 28th
|tomorrow afternoon
|Saturday night
""")

POOLS["phrase"] = L("""
good morning
where is the train station
thank you very much
how much does this cost
I would like a coffee
nice to meet you
where is the bathroom
I'm allergic to nuts
can I have the check please
see you tomorrow
happy birthday
I don't understand
the weather is beautiful today
do you speak English
I need a doctor
excuse me
what time does the museum open
one ticket to the city center
I love this song
good night
my name is Alex
how are you
I'm lost
the food was delicious
is this seat taken
where can I buy a ticket
help
I'm sorry I'm late
call the police
welcome to our home
a table for two please
the bill please
where is the nearest pharmacy
I am vegetarian
congratulations
have a nice day
how do I get to the airport
my phone is broken
it's very hot today
I need a taxi
water without ice
what is your name
the hotel is near the beach
can you help me
I have a reservation
good luck
I'm from Canada
where is the exit
it was a pleasure
cheers
do you have a map
I'd like to return this
my luggage is missing
how far is it
keep the change
I'm looking for a bookstore
the door is locked
good afternoon
that's too expensive
I'll have the soup
where do you live
we are on vacation
I need a charger
happy new year
please speak slowly
what does this mean
""")

POOLS["lang"] = L("""
Spanish
French
German
Italian
Portuguese
Japanese
Chinese
Korean
Dutch
Swedish
Norwegian
Danish
Finnish
Polish
Czech
Greek
Turkish
Russian
Ukrainian
Arabic
Hebrew
Hindi
Bengali
Thai
Vietnamese
Indonesian
Swahili
Hungarian
Romanian
Catalan
Irish
Tagalog
Mandarin
Welsh
""")

POOLS["sitem"] = L("""
milk
eggs
bread
butter
cheese
apples
bananas
tomatoes
onions
garlic
rice
pasta
olive oil
coffee
tea
sugar
flour
yogurt
chicken
salmon
spinach
carrots
potatoes
lemons
oranges
avocados
cereal
peanut butter
honey
orange juice
paper towels
toilet paper
dish soap
laundry detergent
shampoo
toothpaste
batteries
trash bags
sparkling water
oat milk
almonds
strawberries
blueberries
chocolate
crackers
ketchup
mustard
mayo
frozen peas
ice cream
tortillas
black beans
coconut milk
soy sauce
cucumbers
bell peppers
mushrooms
ground beef
bacon
sausages
cat food
dog treats
sponges
aluminum foil
napkins
chickpeas
basil
ginger
cinnamon
granola
""")

POOLS["titem"] = L("""
call the plumber
renew my passport
pay the electricity bill
book a dentist appointment
return the library books
clean the gutters
file the taxes
buy a birthday card for Mom
fix the bike
email the landlord
pick up the dry cleaning
schedule a car service
water the plants
clean out the fridge
update my resume
cancel the magazine subscription
replace the smoke detector battery
back up my phone
organize the garage
mow the lawn
wash the car
sort the recycling
send the thank you notes
charge the camera
defrost the freezer
pay the parking ticket
get a haircut
order new contact lenses
write to Grandma
vacuum the stairs
check the tire pressure
pick up the prescription
reply to the school email
hang the picture frames
clean the windows
recycle the old batteries
print the boarding passes
book the hotel
buy a gift for Sam
walk the dog
take out the trash
change the bed sheets
fix the leaky tap
paint the fence
call the insurance company
sign the permission slip
bake cookies for the fair
register for the race
renew the gym membership
clean the oven
donate old clothes
set up the new printer
plan the weekend trip
read the contract
pay rent
oil the door hinges
test the fire alarm
trim the hedges
descale the kettle
update the laptop
""")

POOLS["dest"] = L("""
the airport
Central Station
the nearest gas station
42 Elm Street
Union Square
the city library
the office
home
the beach
the hospital
the train station
Riverside Park
the mall
the stadium
the nearest pharmacy
Grandma's house
the zoo
the museum of modern art
the bus terminal
Maple Avenue
the harbor
the nearest coffee shop
the university campus
the post office
the cinema downtown
Lakeview Drive
the city hall
the ferry terminal
the closest supermarket
Oak Street 17
the botanical garden
the conference center
the nearest ATM
Pine Hill
the old town
the dentist
school
the gym
the farmers market
the ski resort
the main square
the science museum
Sunset Boulevard
the hotel
the nearest EV charger
the bowling alley
the lighthouse
the vet clinic
the ice rink
the town center
the marina
the arena
the hardware store
the police station
the highway rest stop
the water park
Harbor Road
the castle
the bakery on Main Street
the airport parking lot
the night market
the children's hospital
Green Lane
the yoga studio
the public pool
the courthouse
the aquarium
the concert hall
""")

POOLS["tlabel"] = L("""
pasta
eggs
laundry load
tea
rice
pizza
garlic bread
cookies
workout
break
power nap
parking
oven
roast
plank
meditation
homework
study session
steak
baked potatoes
cake
brownies
dryer
dishwasher
soup
coffee
pomodoro
yoga session
stretching
chicken
muffins
beans
face mask
hair dye
reading
piano practice
game time
screen time
kettle
stew
noodles
popcorn
""")

POOLS["alabel"] = L("""
work
gym
medication
school run
flight
meeting
pills
dog walk
yoga
church
swim practice
early shift
train
dentist
pickup
breakfast
study
morning run
bus
taxi
standup
laundry
vitamins
trash day
piano lesson
soccer
wake up
nap
lunch
interview
doctor
bedtime
shift change
exam
market
ferry
school
night shift
podcast
call
""")

POOLS["food"] = L("""
large pepperoni pizza
pad thai
sushi platter
cheeseburger
chicken curry
veggie burrito
margherita pizza
ramen
falafel wrap
fried chicken
poke bowl
lasagna
pho
Greek salad
fish and chips
chicken tikka masala
beef tacos
dim sum
kebab
mushroom risotto
""")

# Unit pairs: (from, to, factor or special).
POOLS["unitpair"] = [
    ("miles", "kilometers", 1.609344), ("miles", "km", 1.609344),
    ("kilometers", "miles", 0.621371), ("km", "miles", 0.621371),
    ("pounds", "kilograms", 0.453592), ("pounds", "kg", 0.453592),
    ("kilograms", "pounds", 2.204623), ("kg", "lbs", 2.204623),
    ("ounces", "grams", 28.349523), ("grams", "ounces", 0.035274),
    ("feet", "meters", 0.3048), ("meters", "feet", 3.28084),
    ("inches", "centimeters", 2.54), ("inches", "cm", 2.54),
    ("centimeters", "inches", 0.393701), ("cups", "milliliters", 236.588),
    ("cups", "ml", 236.588), ("liters", "gallons", 0.264172),
    ("gallons", "liters", 3.785412), ("fahrenheit", "celsius", "F2C"),
    ("celsius", "fahrenheit", "C2F"), ("degrees fahrenheit", "degrees celsius", "F2C"),
    ("tablespoons", "teaspoons", 3.0), ("teaspoons", "milliliters", 4.928922),
    ("yards", "meters", 0.9144), ("meters", "yards", 1.093613),
    ("stone", "kilograms", 6.350293), ("kilometers per hour", "miles per hour", 0.621371),
    ("mph", "km/h", 1.609344), ("acres", "hectares", 0.404686),
    ("hectares", "acres", 2.471054), ("square feet", "square meters", 0.092903),
    ("pints", "liters", 0.473176), ("quarts", "liters", 0.946353),
    ("fluid ounces", "milliliters", 29.57353), ("millimeters", "inches", 0.03937),
    ("hours", "minutes", 60.0), ("days", "hours", 24.0),
    ("weeks", "days", 7.0), ("megabytes", "gigabytes", 0.001),
    ("kilobytes", "megabytes", 0.001), ("calories", "kilojoules", 4.184),
    ("psi", "bar", 0.068948), ("nautical miles", "kilometers", 1.852),
    ("liters", "cups", 4.226753), ("grams", "pounds", 0.002205),
    # Appended, so that the split of every pair above stays as it was: psi
    # and bar were held out only (index 42), and a user converting tyre
    # pressure meets them in training now.
    ("bar", "psi", 14.503774), ("kilopascals", "psi", 0.145038),
    ("psi", "kilopascals", 6.894757),
]

SYS_LOCALES = ["en-US", "en-GB", "en-AU", "en-CA", "en-IE", "en-IN", "en-NZ", "en-ZA"]
SYS_DEVICES = ["phone", "smart speaker", "car", "watch", "tablet", "kitchen display", "laptop", "tv"]
SYS_NETWORKS = ["wifi", "4g", "5g", "lte", "ethernet", "offline", "3g"]

_split_cache = {}


def pool(name, split):
    key = (name, split)
    if key not in _split_cache:
        items = POOLS[name]
        held = [x for i, x in enumerate(items) if i % 5 == 2]
        train = [x for i, x in enumerate(items) if i % 5 != 2]
        _split_cache[(name, "train")] = train
        _split_cache[(name, "heldout")] = held
    return _split_cache[key]


# ---------------------------------------------------------------------------
# Numbers, durations, times
# ---------------------------------------------------------------------------

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def num_words(n):
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else "-" + ONES[n % 10])
    return "one hundred"


def gen_duration(rng):
    r = rng.random()
    if r < 0.40:
        n = rng.choice(list(range(2, 61)) + [75, 90, 120, 45, 30, 15, 20, 25, 180, 100])
        unit = rng.choice(["minutes", "minutes", "minutes", "min", "mins"])
        return "%d %s" % (n, unit), n
    if r < 0.52:
        n = rng.choice([2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 25, 30, 40, 45])
        return num_words(n) + " minutes", n
    if r < 0.58:
        return rng.choice([("a minute", 1), ("one minute", 1), ("1 minute", 1)])
    if r < 0.74:
        h = rng.choice([1, 1, 1, 2, 2, 3, 4, 5, 6, 8, 10, 12, 24])
        if h == 1:
            s = rng.choice(["an hour", "one hour", "1 hour"])
        elif h <= 12 and rng.random() < 0.4:
            s = num_words(h) + " hours"
        else:
            s = "%d hours" % h
        return s, h * 60
    if r < 0.88:
        return rng.choice([("half an hour", 30), ("an hour and a half", 90),
                           ("a quarter of an hour", 15), ("a half hour", 30),
                           ("two and a half hours", 150), ("an hour and 15 minutes", 75)])
    h = rng.randint(1, 10)
    m = rng.choice([5, 10, 15, 20, 30, 45])
    hs = "hour" if h == 1 else "hours"
    s = rng.choice(["%d %s and %d minutes" % (h, hs, m), "%d %s %d minutes" % (h, hs, m)])
    return s, h * 60 + m


def _hh(h, m):
    return "%02d:%02d" % (h, m)


def gen_time(rng):
    """Returns (surface, 'HH:MM'). Without am/pm the hour is kept as said."""
    r = rng.random()
    pm = rng.random() < 0.5
    suffix = rng.choice(["pm", "pm", "PM", "p.m."] if pm else ["am", "am", "AM", "a.m."])
    if r < 0.22:
        h = rng.randint(1, 12)
        sp = rng.choice(["", " ", " "])
        return "%d%s%s" % (h, sp, suffix), _hh(h % 12 + (12 if pm else 0), 0)
    if r < 0.38:
        h = rng.randint(1, 12)
        m = rng.choice([5, 10, 15, 20, 25, 30, 30, 35, 40, 45, 45, 50, 55, rng.randint(1, 59)])
        sp = rng.choice(["", " ", " "])
        return "%d:%02d%s%s" % (h, m, sp, suffix), _hh(h % 12 + (12 if pm else 0), m)
    if r < 0.53:
        h = rng.randint(0, 23)
        m = rng.choice([0, 0, 15, 30, 45, 10, 20, 40, 50, rng.randint(0, 59)])
        if h < 10 and rng.random() < 0.5:
            return "%d:%02d" % (h, m), _hh(h, m)
        return "%02d:%02d" % (h, m), _hh(h, m)
    if r < 0.75:
        # half past / quarter past / quarter to / o'clock, optionally with a period of day
        form = rng.choice(["half past", "quarter past", "quarter to", "oclock"])
        h = rng.randint(2, 12) if form == "quarter to" else rng.randint(1, 12)
        w = num_words(h) if rng.random() < 0.75 else str(h)
        if form == "half past":
            s, hour, m = "half past " + w, h, 30
        elif form == "quarter past":
            s, hour, m = "quarter past " + w, h, 15
        elif form == "quarter to":
            s, hour, m = "quarter to " + w, h - 1, 45
        else:
            s, hour, m = w + " o'clock", h, 0
        if rng.random() < 0.35:
            period = rng.choice(["in the morning", "in the afternoon", "in the evening", "at night"])
            ok = {"in the morning": range(1, 12), "in the afternoon": range(1, 6),
                  "in the evening": range(5, 12), "at night": range(8, 12)}[period]
            if hour in ok:
                s = s + " " + period
                if period != "in the morning":
                    hour += 12
        return s, _hh(hour % 24 if hour != 12 else 12, m)
    if r < 0.83:
        return rng.choice([("noon", "12:00"), ("midday", "12:00"), ("midnight", "00:00"),
                           ("noon", "12:00")])
    if r < 0.93:
        h = rng.randint(1, 12)
        m = rng.choice([15, 30, 45, 5, 10, 20, 40, 50])
        mw = {5: "oh five", 10: "ten", 15: "fifteen", 20: "twenty", 30: "thirty",
              40: "forty", 45: "forty-five", 50: "fifty"}[m]
        s = num_words(h) + " " + mw
        if rng.random() < 0.5:
            return s + " " + suffix, _hh(h % 12 + (12 if pm else 0), m)
        return s, _hh(h, m)
    h = rng.randint(1, 12)
    return str(h), _hh(h, 0)


def gen_percent(rng, words_prob=0.0):
    n = rng.choice(list(range(5, 101, 5)) * 3 + list(range(1, 101)))
    if words_prob and n % 10 == 0 and rng.random() < words_prob:
        return num_words(n), n
    return str(n), n


def gen_temp(rng, unit="celsius"):
    if unit == "fahrenheit":
        v = rng.randint(60, 80) if rng.random() < 0.8 else rng.randint(41, 95)
        return str(v), v
    if rng.random() < 0.22:
        v = rng.randint(32, 52) / 2.0  # 16.0 .. 26.0 in halves
        if v == int(v):
            v = int(v)
    elif rng.random() < 0.85:
        v = rng.randint(16, 26)
    else:
        v = rng.randint(5, 35)
    return fmt_num(v), v


def fmt_num(v):
    if isinstance(v, float) and v == int(v):
        return str(int(v))
    return str(v)


def gen_conv_value(rng):
    r = rng.random()
    if r < 0.55:
        v = rng.choice([2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 250, 500, 1000])
    elif r < 0.85:
        v = rng.choice([0.5, 1.5, 2.5, 3.5, 0.25, 0.75, 4.2, 7.5, 12.5, 2.2, 6.8, 9.9])
    elif r < 0.97:
        v = rng.randint(2, 999)
    else:
        return rng.choice([("a dozen", 12), ("half a dozen", 6), ("a hundred", 100), ("a thousand", 1000)])
    return fmt_num(v), v


# ---------------------------------------------------------------------------
# Slots: each returns a list of segments [text, bind]; bind is None (plain) or
# (key, mode, value) with mode 'span' (value = text as rendered), 'val' (fixed
# value) or 'item' (array element = text as rendered).
# ---------------------------------------------------------------------------

# Invented values: a model that has seen each pool's values a thousand times
# learns to recall them; it only learns to copy the user's words into the
# call when it cannot know them. With SYNTHETIC > 0 (training only) that share
# of free-text values is made of invented words, shaped like the pool's own.
SYLLABLES = ("ba be bi bo bu da de di do ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu "
             "ra re ri ro ru sa se si so ta te ti to va ve vi zo zu an en in on or ar el il ul ex").split()
INVENTED = {"person": (1, True), "city": (2, True), "lang": (1, True), "room": (2, False), "genre": (2, False),
            "artist": (2, True), "song": (3, False), "dest": (3, False), "food": (2, False), "sitem": (2, False),
            "titem": (4, False), "tlabel": (2, False), "alabel": (2, False), "title": (4, False),
            "msg": (7, False), "note": (7, False), "q": (7, False), "phrase": (6, False)}
SYNTHETIC = 0.0


def invented(rng, name):
    """A value for pool `name` made of invented words and words of the pool.
    An invented word is syllables, a word of any pool's training values, or
    random letters: the letters tokenize into pieces of every kind, so the
    model learns to copy any piece sequence, not only the syllables'."""
    most, capital = INVENTED[name]
    real = " ".join(POOLS[name]).split()
    words = []
    for _ in range(rng.randint(1, most)):
        r = rng.random()
        if most > 2 and r < 0.4:
            words.append(rng.choice(real).lower())
        elif r < 0.6:
            words.append(rng.choice(training_words()))
        elif r < 0.8:
            w = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
            words.append(w.capitalize() if capital else w)
        else:
            w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3)))
            words.append(w.capitalize() if capital else w)
    return " ".join(words)


_training_words = []


def training_words():
    """Every word of every pool's training values (never a held-out value's)."""
    if not _training_words:
        words = {w for n in POOLS for v in pool(n, "train") if isinstance(v, str) for w in v.split()}
        _training_words.extend(sorted(words))
    return _training_words


class Ctx:
    def __init__(self, rng, split):
        self.rng = rng
        self.split = split
        self.memo = {}

    def pick(self, name):
        if self.split == "train" and name in INVENTED and SYNTHETIC and self.rng.random() < SYNTHETIC:
            return invented(self.rng, name)
        return self.rng.choice(pool(name, self.split))


def seg(text, bind=None):
    return [text, bind]


def _span(name):
    def f(ctx, key):
        return [seg(ctx.pick(name), (key, "span", None) if key else None)]
    return f


def _choice(options):
    """options: list of (surface, value)."""
    def f(ctx, key):
        s, v = ctx.rng.choice(options)
        return [seg(s, (key, "val", v))]
    return f


def slot_music(ctx, key):
    r = ctx.rng.random()
    name = "genre" if r < 0.35 else ("artist" if r < 0.75 else "song")
    return [seg(ctx.pick(name), (key, "span", None))]


def slot_items(name):
    def f(ctx, key):
        rng = ctx.rng
        k = rng.choice([1, 1, 2, 2, 2, 3, 3, 4])
        items = rng.sample(pool(name, ctx.split), k)
        items = [ctx.pick(name) if name in INVENTED else it for it in items]
        if len(set(items)) < k:
            items = rng.sample(pool(name, ctx.split), k)
        out = []
        for i, it in enumerate(items):
            if i > 0:
                if i == k - 1:
                    out.append(seg(rng.choice([" and ", " and ", ", and "]) if k > 2 else " and "))
                else:
                    out.append(seg(", "))
            out.append(seg(it, (key, "item", None)))
        return out
    return f


def slot_dur(ctx, key):
    s, v = gen_duration(ctx.rng)
    return [seg(s, (key, "val", v))]


def slot_time(ctx, key):
    s, v = gen_time(ctx.rng)
    return [seg(s, (key, "val", v))]


def slot_bright(ctx, key):
    s, v = gen_percent(ctx.rng, 0.1)
    return [seg(s, (key, "val", v))]


def slot_level(ctx, key):
    s, v = gen_percent(ctx.rng, 0.2)
    return [seg(s, (key, "val", v))]


def _temp_unit(ctx):
    """The unit a thermostat command says, drawn once per command: the value
    is in that unit's range (a 5-95 catalogue: _fahrenheit_fits), so that "68 degrees
    fahrenheit" is copied as 68. A template with no unit slot says none and
    keeps celsius values."""
    if "tunit" not in ctx.memo:
        fahrenheit = _fahrenheit_fits() and ctx.rng.random() < 0.35
        surfaces = (["fahrenheit", "Fahrenheit", "fahrenheit", "F"] if fahrenheit
                    else ["celsius", "Celsius", "centigrade"])
        ctx.memo["tunit"] = ("fahrenheit" if fahrenheit else "celsius", ctx.rng.choice(surfaces))
    return ctx.memo["tunit"]


def slot_temp(ctx, key):
    unit = _temp_unit(ctx)[0] if ctx.memo.get("says_unit") else "celsius"
    s, v = gen_temp(ctx.rng, unit)
    return [seg(s, (key, "val", v))]


@functools.lru_cache(maxsize=None)
def _fahrenheit_fits():
    """Whether the catalogue's thermostat takes fahrenheit values (41-95).
    The catalogue and the committed model go together: the model the page
    ships was trained on a thermostat capped at 35, and web/tools.json keeps
    that cap until a model trained on the 5-95 catalogue replaces it (then
    set its maximum to 95 and this generator writes fahrenheit commands)."""
    tool = next(t for t in load_tools() if t["name"] == "set_thermostat")
    return tool["parameters"]["properties"]["temperature"].get("maximum", 0) >= 95


def slot_tunit(ctx, key):
    unit, surface = _temp_unit(ctx)
    return [seg(surface, (key, "val", unit))]


def slot_eday(ctx, key):
    pre, day = ctx.pick("eday").split("|")
    out = []
    if pre:
        out.append(seg(pre.rstrip() + " "))
    out.append(seg(day, (key, "span", None)))
    return out


def _unitpair(ctx):
    if "unitpair" not in ctx.memo:
        ctx.memo["unitpair"] = ctx.pick("unitpair")
    return ctx.memo["unitpair"]


def slot_cval(ctx, key):
    s, v = gen_conv_value(ctx.rng)
    return [seg(s, (key, "val", v))]


def slot_cfrom(ctx, key):
    return [seg(_unitpair(ctx)[0], (key, "span", None))]


def slot_cto(ctx, key):
    return [seg(_unitpair(ctx)[1], (key, "span", None))]


def slot_num(lo, hi):
    def f(ctx, key):
        return [seg(str(ctx.rng.randint(lo, hi)))]
    return f


ON_VERBS = [("turn on", "on"), ("switch on", "on"), ("turn on", "on")]
OFF_VERBS = [("turn off", "off"), ("switch off", "off"), ("turn off", "off"), ("shut off", "off")]

SLOTS = {
    # name: (default key, function)
    "room": ("room", _span("room")),
    "on_off": ("state", _choice([("on", "on"), ("off", "off")])),
    "light_verb": ("state", _choice(ON_VERBS + OFF_VERBS)),
    "light_on": ("state", _choice(ON_VERBS)),
    "bright": ("brightness", slot_bright),
    "temp": ("temperature", slot_temp),
    "tunit": ("unit", slot_tunit),
    "dur": ("minutes", slot_dur),
    "tlabel": ("label", _span("tlabel")),
    "alabel": ("label", _span("alabel")),
    "time": ("time", slot_time),
    "city": ("city", _span("city")),
    "wday": ("day", _choice([("today", "today"), ("tomorrow", "tomorrow"), ("tonight", "today"),
                             ("this afternoon", "today"), ("this evening", "today"),
                             ("tomorrow morning", "tomorrow"), ("tomorrow night", "tomorrow"),
                             ("today", "today"), ("tomorrow", "tomorrow"), ("tomorrow", "tomorrow")])),
    "person": ("name", _span("person")),
    "msg": ("text", _span("msg")),
    "eday": ("day", slot_eday),
    "title": ("title", _span("title")),
    "music": ("query", slot_music),
    "genre": ("query", _span("genre")),
    "artist": ("query", _span("artist")),
    "song": ("query", _span("song")),
    "level": ("level", slot_level),
    "dest": ("destination", _span("dest")),
    "mode_adv": ("mode", _choice([("by car", "driving"), ("driving", "driving"), ("on foot", "walking"),
                                  ("walking", "walking"), ("by bike", "cycling"), ("by bicycle", "cycling"),
                                  ("cycling", "cycling"), ("by bus", "transit"), ("by train", "transit"),
                                  ("by public transport", "transit"), ("on the subway", "transit"),
                                  ("by transit", "transit")])),
    "mode_adj": ("mode", _choice([("driving", "driving"), ("walking", "walking"), ("cycling", "cycling"),
                                  ("bike", "cycling"), ("transit", "transit"),
                                  ("public transport", "transit")])),
    "mode_verb": ("mode", _choice([("drive", "driving"), ("walk", "walking"), ("cycle", "cycling"),
                                   ("bike", "cycling"), ("take the bus", "transit"),
                                   ("take the train", "transit")])),
    "slist": ("list", _choice([("shopping list", "shopping"), ("grocery list", "shopping"),
                               ("shopping list", "shopping")])),
    "tlist": ("list", _choice([("to-do list", "todo"), ("todo list", "todo"), ("to do list", "todo"),
                               ("task list", "todo")])),
    "sitems": ("items", slot_items("sitem")),
    "titems": ("items", slot_items("titem")),
    "door": ("door", _choice([("front", "front"), ("front", "front"), ("main", "front"), ("back", "back"),
                              ("back", "back"), ("rear", "back"), ("garage", "garage"),
                              ("garage", "garage")])),
    "lock_verb": ("locked", _choice([("lock", True), ("unlock", False)])),
    "lock_state": ("locked", _choice([("locked", True), ("unlocked", False)])),
    "cval": ("value", slot_cval),
    "cfrom": ("from_unit", slot_cfrom),
    "cto": ("to_unit", slot_cto),
    "q": ("query", _span("q")),
    "note": ("text", _span("note")),
    "dnd_onoff": ("enabled", _choice([("turn on", True), ("switch on", True), ("enable", True),
                                      ("activate", True), ("turn off", False), ("switch off", False),
                                      ("disable", False), ("deactivate", False)])),
    "dnd_on": ("enabled", _choice([("turn on", True), ("switch on", True), ("enable", True),
                                   ("activate", True)])),
    "dnd_state": ("enabled", _choice([("on", True), ("off", False)])),
    "phrase": ("text", _span("phrase")),
    "lang": ("target_language", _span("lang")),
    # plain slots for out-of-catalogue requests (no argument)
    "food": (None, _span("food")),
    "n": (None, slot_num(3, 99)),
    "m": (None, slot_num(2, 49)),
    "small": (None, slot_num(2, 8)),
    "sitem": (None, _span("sitem")),
}

TOOL_SLOT_KEYS = {
    "send_message": {"person": "recipient"},
    "call_contact": {"person": "name"},
}

# Slots holding free text that may end a clause ambiguously; such a template
# may only be the last part of a multi-call query.
TAIL_SLOTS = {"msg", "note", "q", "phrase", "sitems", "titems", "title", "music", "genre",
              "artist", "song", "dest"}


# ---------------------------------------------------------------------------
# Templates. "~" at the start: not an imperative (no "could you" prefix, not
# used as a part of a multi-call query). {slot} or {slot:key}; [text|key=value]
# is a fixed span that sets key to value.
# ---------------------------------------------------------------------------

TEMPLATES = {
    "set_light": [
        "{light_verb} the {room} lights",
        "{light_verb} the lights in the {room}",
        "turn the {room} lights {on_off}",
        "switch the lights {on_off} in the {room}",
        "~{room} lights {on_off}",
        "[kill|state=off] the lights in the {room}",
        "set the {room} lights to {bright} percent",
        "dim the {room} lights to {bright}%",
        "~lights in the {room} at {bright} percent",
        "change the brightness in the {room} to {bright}",
        "{light_on} the {room} light and set it to {bright} percent",
        "turn the {room} lights [on|state=on] at {bright}%",
        "toggle the {room} lights",
        "flip the light switch in the {room}",
        "bring the {room} lights up to {bright} percent",
        "{light_verb} the light in the {room}",
        "~it's too dark in the {room}, [turn the lights on|state=on]",
        "^lights {on_off} in the {room}",
        "set the {room} lights to [full brightness|brightness=100]",
        "[switch on|state=on] the {room} lights at [half brightness|brightness=50]",
        "put the {room} lights at {bright} percent",
        "{light_verb} all the lights in the {room}",
        "~can I get the {room} lights {on_off}",
        "make the {room} lights {bright} percent",
        "{light_on} the {room} lamp at {bright} percent brightness",
        "~{room} lights to {bright}%",
    ],
    "set_thermostat": [
        "set the thermostat to {temp}",
        "set the heating to {temp} degrees",
        "set the temperature to {temp} degrees {tunit}",
        "make it {temp} degrees in the {room}",
        "heat the {room} to {temp} degrees",
        "set the {room} to {temp} degrees",
        "~I'd like it {temp} degrees in here",
        "turn the heating up to {temp}",
        "turn the heat down to {temp} degrees",
        "change the thermostat to {temp} {tunit}",
        "set the {room} thermostat to {temp} degrees {tunit}",
        "warm the {room} up to {temp}",
        "^thermostat to {temp} degrees",
        "~can we get the {room} to {temp} degrees",
        "keep the {room} at {temp} degrees {tunit}",
        "set heating in the {room} to {temp} {tunit}",
        "bump the temperature to {temp} degrees",
        "cool the {room} down to {temp} degrees",
        "~{temp} degrees in the {room}",
        "put the heating on {temp} degrees {tunit}",
        "~it's cold, set the heat to {temp}",
        "adjust the {room} temperature to {temp}",
        "set the heating in the {room} to {temp} degrees {tunit}",
        "~the {room} should be {temp} degrees",
    ],
    "set_timer": [
        "set a timer for {dur}",
        "start a timer for {dur}",
        "^timer for {dur}",
        "~I need a timer for {dur}",
        "set a {tlabel} timer for {dur}",
        "start a timer for {dur} for the {tlabel}",
        "set a timer for {dur} called {tlabel}",
        "set a timer for {dur} labeled {tlabel}",
        "count down {dur}",
        "put a timer on for {dur}",
        "~can I get a timer for {dur}",
        "~{tlabel} timer, {dur}",
        "time {dur} for the {tlabel}",
        "start a {tlabel} timer for {dur}",
        "set the timer to {dur}",
        "start counting down {dur}",
        "make a timer for {dur} named {tlabel}",
        "~{dur} on the clock for the {tlabel}",
        "^timer {dur} for {tlabel}",
        "set a countdown for {dur}",
        "start a countdown of {dur}",
        "~{tlabel} timer for {dur}",
    ],
    "set_alarm": [
        "set an alarm for {time}",
        "wake me up at {time}",
        "set an alarm at {time}",
        "^alarm for {time}",
        "~I need to get up at {time}",
        "set an alarm for {time} called {alabel}",
        "set a {alabel} alarm for {time}",
        "wake me at {time}",
        "create an alarm for {time} labeled {alabel}",
        "set my alarm to {time}",
        "~can you wake me up at {time}",
        "~{alabel} alarm at {time}",
        "add an alarm at {time} for {alabel}",
        "alarm at {time}, label it {alabel}",
        "get me up at {time}",
        "set an alarm for {time} named {alabel}",
        "put an alarm on for {time}",
        "~I want an alarm at {time}",
        "^new alarm {time}",
        "make a {alabel} alarm at {time}",
        "set an alarm to go off at {time}",
    ],
    "get_weather": [
        "~what's the weather in {city}",
        "~what's the weather like in {city} {wday}",
        "~will it rain in {city} {wday}",
        "~how hot is it in {city}",
        "~{city} weather",
        "~{city} weather {wday}",
        "get the forecast for {city}",
        "get me the weather for {city} {wday}",
        "~is it going to snow in {city} {wday}",
        "~do I need an umbrella in {city} {wday}",
        "~what's the forecast for {wday} in {city}",
        "check the weather in {city}",
        "check the weather in {city} for {wday}",
        "~how cold will it be in {city} {wday}",
        "~weather forecast {city}",
        "tell me the weather in {city} {wday}",
        "~is it sunny in {city}",
        "~what will the weather be like in {city} {wday}",
        "show me the weather for {city}",
        "~any chance of rain in {city} {wday}",
        "~what's the temperature in {city} [right now|day=today]",
        "~how's the weather looking in {city}",
        "~what's the weather going to be {wday} in {city}",
    ],
    "send_message": [
        "text {person} {msg}",
        "send a message to {person} saying {msg}",
        "tell {person} {msg}",
        "message {person}: {msg}",
        "send {person} a text saying {msg}",
        "let {person} know {msg}",
        "send a text to {person}: {msg}",
        "shoot {person} a message that says {msg}",
        "send \"{msg}\" to {person}",
        "text \"{msg}\" to {person}",
        "write to {person}: {msg}",
        "drop {person} a line saying {msg}",
        "send {person} a message: {msg}",
        "~can you let {person} know that {msg}",
        "message {person} and say {msg}",
        "send a quick text to {person} saying {msg}",
        "text {person} saying \"{msg}\"",
        "reply to {person} with {msg}",
        "send this to {person}: {msg}",
        "tell {person} by text that {msg}",
        "send {person} the message {msg}",
    ],
    "call_contact": [
        "call {person}",
        "ring {person}",
        "phone {person}",
        "give {person} a call",
        "dial {person}",
        "call {person} for me",
        "start a call with {person}",
        "get {person} on the phone",
        "~I want to talk to {person}, call them",
        "place a call to {person}",
        "ring {person} up",
        "make a call to {person}",
        "~can you call {person} now",
        "call {person} on speaker",
        "get me {person} on the line",
        "~I need to speak to {person}, give them a ring",
        "buzz {person}",
        "try calling {person}",
        "connect me with {person}",
        "call {person} right away",
        "call up {person}",
        "start a phone call with {person}",
        "~time to call {person}",
        "ring {person} now",
    ],
    "create_event": [
        "add {title} to my calendar {eday}",
        "schedule {title} {eday} at {time}",
        "put {title} in my calendar {eday}",
        "create an event called {title} {eday} at {time}",
        "~I have {title} {eday} at {time}, add it to my calendar",
        "^new event {title} {eday}",
        "add an event {title} {eday}",
        "schedule {title} {eday}",
        "put {title} on the calendar {eday} at {time}",
        "book {title} {eday} at {time}",
        "add {title} at {time} {eday}",
        "create a calendar event for {title} {eday}",
        "~remember I have {title} {eday}, put it in the calendar",
        "block out time {eday} at {time} for {title}",
        "^add to my calendar: {title} {eday} at {time}",
        "make an appointment {eday} at {time} called {title}",
        "~calendar: {title} {eday}",
        "set up {title} {eday} at {time}",
        "put {title} in the diary {eday}",
        "add an event {eday} called {title}",
        "~{title} {eday} at {time}, please add it",
    ],
    "play_music": [
        "play {music}",
        "put on {music}",
        "play some {genre}",
        "~I want to listen to {music}",
        "play songs by {artist}",
        "play something by {artist}",
        "[shuffle|shuffle=true] {music}",
        "play {music} [on shuffle|shuffle=true]",
        "play {music} [in order|shuffle=false]",
        "play {artist} [without shuffle|shuffle=false]",
        "put some {genre} on",
        "start playing {music}",
        "~can you play {music}",
        "play {music} [shuffled|shuffle=true]",
        "[shuffle|shuffle=true] some {genre}",
        "play my {genre} playlist",
        "listen to {music}",
        "throw on some {genre}",
        "queue up {music}",
        "play {song}",
        "play {artist} [with shuffle on|shuffle=true]",
        "[turn shuffle off|shuffle=false] and play {music}",
        "put {artist} on [shuffle|shuffle=true]",
        "play the song {song}",
        "~some {genre} would be nice",
    ],
    "set_volume": [
        "set the volume to {level}",
        "^volume {level}",
        "turn the volume to {level} percent",
        "change the volume to {level}%",
        "set volume at {level}",
        "[mute|level=0] the speaker",
        "turn the volume [all the way up|level=100]",
        "put the volume on {level}",
        "make the volume {level}",
        "turn it down to {level}",
        "turn it up to {level}",
        "set the speaker volume to {level} percent",
        "~volume at {level} percent",
        "^[max|level=100] volume",
        "lower the volume to {level}",
        "raise the volume to {level}",
        "adjust the volume to {level}",
        "[silence|level=0] the speaker",
        "turn the sound down to {level}",
        "set it to [half volume|level=50]",
        "bring the volume down to {level}",
    ],
    "navigate_to": [
        "navigate to {dest}",
        "take me to {dest}",
        "^directions to {dest}",
        "~how do I get to {dest} {mode_adv}",
        "give me {mode_adj} directions to {dest}",
        "get me to {dest} {mode_adv}",
        "start navigation to {dest}",
        "^route to {dest} {mode_adv}",
        "~I want to {mode_verb} to {dest}",
        "show me the way to {dest}",
        "navigate to {dest} {mode_adv}",
        "find a {mode_adj} route to {dest}",
        "~what's the fastest way to {dest} {mode_adv}",
        "guide me to {dest}",
        "plan a {mode_adj} route to {dest}",
        "~let's {mode_verb} to {dest}",
        "head to {dest}",
        "take me to {dest} {mode_adv}",
        "get directions to {dest}",
        "start {mode_adj} directions to {dest}",
        "~I need to get to {dest}",
    ],
    "add_to_list": [
        "add {sitems} to my {slist}",
        "put {sitems} on the {slist}",
        "add {sitems} to the {slist}",
        "~[we need|list=shopping] {sitems}",
        "~[we're out of|list=shopping] {sitems}",
        "add to the {slist}: {sitems}",
        "add {titems} to my {tlist}",
        "put {titems} on my {tlist}",
        "add to my {tlist}: {titems}",
        "~{tlist}: {titems}",
        "stick {sitems} on the {slist}",
        "include {sitems} on the {slist}",
        "add {titems} to the {tlist}",
        "put {titems} on the {tlist}",
        "~can you add {sitems} to the {slist}",
        "~my {slist} needs {sitems}",
        "add these to my {tlist}: {titems}",
        "add these to my {slist}: {sitems}",
        "write {titems} on my {tlist}",
        "~{slist}: {sitems}",
        "put {titems} on my [tasks|list=todo]",
        "~[we're running low on|list=shopping] {sitems}",
    ],
    "lock_door": [
        "{lock_verb} the {door} door",
        "~is the {door} door locked? [lock|locked=true] it",
        "make sure the {door} door is [locked|locked=true]",
        "[unlock|locked=false] the {door} door for me",
        "~can you [unlock|locked=false] the {door} door",
        "{lock_verb} the {door} door now",
        "~the {door} door needs to be [locked|locked=true]",
        "[secure|locked=true] the {door} door",
        "[open the lock on|locked=false] the {door} door",
        "[lock up|locked=true] the {door} door",
        "~{door} door {lock_state}",
        "set the {door} door to {lock_state}",
        "[let me in|locked=false] at the {door} door",
        "{lock_verb} our {door} door",
        "{lock_verb} the {door} entrance",
        "~I forgot to [lock|locked=true] the {door} door",
        "keep the {door} door [locked|locked=true]",
        "go {lock_verb} the {door} door",
        "~the {door} door should be {lock_state}",
        "[lock|locked=true] the {door} door before bed",
        "[bolt|locked=true] the {door} door",
        "[unlatch|locked=false] the {door} door",
        "~{door} door, {lock_verb} it",
    ],
    "convert_units": [
        "convert {cval} {cfrom} to {cto}",
        "~how many {cto} is {cval} {cfrom}",
        "~what's {cval} {cfrom} in {cto}",
        "~{cval} {cfrom} to {cto}",
        "change {cval} {cfrom} into {cto}",
        "~how much is {cval} {cfrom} in {cto}",
        "convert {cval} {cfrom} into {cto}",
        "~what is {cval} {cfrom} in {cto}",
        "turn {cval} {cfrom} into {cto}",
        "~{cval} {cfrom} in {cto}",
        "express {cval} {cfrom} in {cto}",
        "convert {cval} from {cfrom} to {cto}",
        "~how many {cto} are in {cval} {cfrom}",
        "~I need {cval} {cfrom} in {cto}",
        "give me {cval} {cfrom} in {cto}",
        "~{cval} {cfrom} equals how many {cto}",
        "work out {cval} {cfrom} in {cto}",
        "calculate {cval} {cfrom} in {cto}",
        "convert {cval} {cfrom} to {cto} for me",
        "~quick conversion: {cval} {cfrom} to {cto}",
        "~how many {cto} in {cval} {cfrom}",
        "switch {cval} {cfrom} to {cto}",
        "~{cval} {cfrom} is how many {cto}",
    ],
    "search_web": [
        "search for {q}",
        "look up {q}",
        "google {q}",
        "search the web for {q}",
        "find information about {q}",
        "look up {q} online",
        "do a web search for {q}",
        "search {q}",
        "~can you search the internet for {q}",
        "~web search: {q}",
        "find me something on {q}",
        "run a search for {q}",
        "search online for {q}",
        "~I want to know about {q}, search it",
        "find out about {q}",
        "search the internet for {q}",
        "check the web for {q}",
        "~quick search: {q}",
        "look online for {q}",
        "search up {q}",
        "search the net for {q}",
        "look into {q}",
        "~can you find {q} on the internet",
    ],
    "take_note": [
        "take a note: {note}",
        "note that {note}",
        "make a note {note}",
        "write down {note}",
        "save a note saying {note}",
        "jot down {note}",
        "remember that {note}",
        "add a note: {note}",
        "create a note that says {note}",
        "^new note: {note}",
        "~note: {note}",
        "take a note that {note}",
        "make a note that {note}",
        "write a note saying {note}",
        "save this as a note: {note}",
        "~can you note down {note}",
        "put down a note: {note}",
        "record a note: {note}",
        "jot this down: {note}",
        "~note to self: {note}",
        "add to my notes: {note}",
        "save a note: {note}",
        "make a quick note: {note}",
    ],
    "set_do_not_disturb": [
        "{dnd_onoff} do not disturb",
        "{dnd_onoff} do-not-disturb mode",
        "{dnd_on} do not disturb until {time:until}",
        "[silence|enabled=true] my notifications until {time:until}",
        "~[I don't want to be disturbed|enabled=true] until {time:until}",
        "{dnd_onoff} dnd",
        "[mute|enabled=true] all notifications",
        "~[no interruptions|enabled=true] until {time:until}",
        "[go quiet|enabled=true] until {time:until}",
        "[stop silencing|enabled=false] my phone",
        "{dnd_on} do not disturb mode until {time:until}",
        "[hold all notifications|enabled=true] until {time:until}",
        "[put my phone on do not disturb|enabled=true]",
        "[put my phone on do not disturb|enabled=true] until {time:until}",
        "[take me off do not disturb|enabled=false]",
        "~[do not disturb off|enabled=false]",
        "set do not disturb [on|enabled=true] until {time:until}",
        "switch do not disturb {dnd_state}",
        "~[don't let anyone bother me|enabled=true] until {time:until}",
        "[enable|enabled=true] quiet mode until {time:until}",
        "{dnd_onoff} do not disturb on my phone",
    ],
    "translate_text": [
        "translate {phrase} into {lang}",
        "~how do you say {phrase} in {lang}",
        "~what's {phrase} in {lang}",
        "translate \"{phrase}\" to {lang}",
        "say {phrase} in {lang}",
        "~can you translate {phrase} to {lang}",
        "translate this into {lang}: {phrase}",
        "~what is \"{phrase}\" in {lang}",
        "give me the {lang} for {phrase}",
        "~how would I say {phrase} in {lang}",
        "translate {phrase} to {lang} for me",
        "put {phrase} into {lang}",
        "~{lang} for \"{phrase}\"",
        "translate to {lang}: {phrase}",
        "~how do I say {phrase} in {lang}",
        "render \"{phrase}\" in {lang}",
        "convert {phrase} into {lang}",
        "~in {lang}, how do you say {phrase}",
        "tell me how to say {phrase} in {lang}",
        "help me say {phrase} in {lang}",
        "~what does {phrase} sound like in {lang}",
        "translate {phrase} for me into {lang}",
        "~I need {phrase} in {lang}",
    ],
}

# Out-of-catalogue requests: (template, info). info=True: something a web search
# could answer, so search_web is never declared alongside it.
NONE_TEMPLATES = [
    ("book a flight to {city}", False),
    ("order a {food}", False),
    ("order {food} for dinner", False),
    ("~tell me a joke", True),
    ("~what is {n} times {m}", True),
    ("~what's {n} plus {m}", True),
    ("flip a coin", False),
    ("roll a die", False),
    ("take a picture", False),
    ("take a selfie", False),
    ("record a video", False),
    ("turn on the TV in the {room}", False),
    ("start the dishwasher", False),
    ("start the washing machine", False),
    ("vacuum the {room}", False),
    ("close the blinds in the {room}", False),
    ("open the curtains in the {room}", False),
    ("book a hotel in {city}", False),
    ("rent a car in {city}", False),
    ("pay my phone bill", False),
    ("~what's my bank balance", False),
    ("transfer {n} dollars to {person}", False),
    ("~who won the game last night", True),
    ("read my emails", False),
    ("read my last message from {person}", False),
    ("~what's on my calendar tomorrow", False),
    ("turn off my alarm", False),
    ("stop the timer", False),
    ("skip this song", False),
    ("pause the music", False),
    ("hang up the call", False),
    ("take a screenshot", False),
    ("delete my last note", False),
    ("book a table for {small} at an Italian place", False),
    ("~how tall is Mount Everest", True),
    ("~what's the capital of Australia", True),
    ("write me a poem about {city}", True),
    ("start the robot vacuum", False),
    ("turn on the coffee machine", False),
    ("buy tickets to see {artist}", False),
    ("reserve a seat on the train to {city}", False),
    ("~what's the square root of {n}", True),
    ("clear my shopping list", False),
    ("remove {sitem} from the shopping list", False),
    ("cancel my meeting with {person}", False),
    ("charge the car", False),
    ("preheat the oven to {n}0 degrees", False),
    ("turn on the fan in the {room}", False),
    ("recommend a good movie", True),
    ("cancel my subscription", False),
    ("lock my screen", False),
    ("turn up the brightness on my screen", False),
    ("~what song is this", False),
    ("start the sprinklers", False),
    ("open the windows in the {room}", False),
    ("order more printer paper", False),
    ("~how long will it take to cook a turkey", True),
    ("snooze the alarm", False),
    ("delete the last photo", False),
    ("show me my step count", False),
    ("wish {person} a happy birthday on social media", False),
    ("book a taxi for tonight", False),
]

# Small talk: greetings, thanks, questions about the assistant and chatter.
# None asks for anything, so none gets a call, whatever tools are declared;
# several name what a tool does ("music", "a note", "the weather") without
# asking for it. Held out by template, as the requests are.
CHATTER_TEMPLATES = [
    "hello there", "hi", "hey", "good morning", "good evening", "hello", "hiya", "hey there",
    "~how are you", "~how's it going", "~how are you doing today", "~what's up",
    "thanks", "thank you", "thanks, that's all", "thank you so much", "cheers", "thanks a lot",
    "that's all for now", "never mind", "nothing, forget it", "no thanks", "ok", "okay cool",
    "great, thanks", "perfect", "awesome", "nice", "got it", "sounds good", "all good",
    "~who are you", "~what can you do", "~what's your name", "~are you a robot",
    "~who made you", "~do you have feelings", "~are you listening", "~can you hear me",
    "~what are you", "~how do you work", "~are you there",
    "I love music", "I had a long day", "I'm bored", "I'm so tired today", "today was great",
    "that was a good song", "the weather is lovely today", "I just got home", "my {person} says hi",
    "I'm back from {city}", "you're funny", "you're the best", "good job", "well done",
    "I was just thinking out loud", "sorry, wrong button", "oops", "lol", "haha",
    "good night", "bye", "see you later", "talk to you tomorrow", "have a nice day",
    "I don't need anything right now", "just saying hi", "testing, testing", "is this thing on",
    "my note was really long", "the timer went off, thanks", "the lights look nice",
    "I'm going to bed soon", "it's raining here", "I like this song", "we had pizza for dinner",
    "I'll call {person} later myself", "maybe later", "not now", "hmm", "let me think",
    "that's interesting", "yes", "no", "sure", "wow", "you did great", "thanks for the reminder",
]

# Request for tool T whose tool is absent: tools that could arguably serve the
# request are not declared either.
CONFLICT = {
    "get_weather": ["search_web"],
    "convert_units": ["search_web"],
    "translate_text": ["search_web"],
    "add_to_list": ["take_note"],
    "take_note": ["add_to_list"],
    "set_alarm": ["set_timer"],
    "set_timer": ["set_alarm"],
    "set_do_not_disturb": ["set_volume"],
    "set_volume": ["set_do_not_disturb"],
}

POLITE_PRE_IMP = ["please ", "could you ", "can you ", "would you ", "hey, ", "hey assistant, ", "ok, ",
                  "go ahead and ", "I need you to ", "quick, ", "hi, ", "could you please "]
POLITE_PRE_TERSE = ["please, ", "hey, ", "ok, ", "hi, ", "quick, ", "hey assistant, "]
POLITE_PRE_OTHER = ["hey, ", "hey assistant, ", "ok, ", "hi, ", "so, ", "um, "]
POLITE_SUF = [" please", ", please", ", thanks", ", thank you", " thanks", " for me"]
POLITE_SUF_TAIL = [", please", ", thanks", ", thank you"]
QUESTION_STARTS = ("what", "how", "will", "is ", "do ", "any", "can", "could", "would", "where")

TOKEN_RE = re.compile(r"\{(\w+)(?::(\w+))?\}|\[([^|\]]+)\|(\w+)=([^\]]+)\]")


class Template:
    def __init__(self, tid, tool, text, info=False):
        self.id = tid
        self.tool = tool
        self.imperative = not text.startswith("~")
        self.terse = text.startswith("^")
        self.prefixes = (POLITE_PRE_TERSE if self.terse else
                         POLITE_PRE_IMP if self.imperative else POLITE_PRE_OTHER)
        self.text = text.lstrip("~^")
        self.info = info
        self.tokens = []  # ('plain', text) | ('slot', name, key) | ('fixed', text, key, value)
        pos = 0
        for mt in TOKEN_RE.finditer(self.text):
            if mt.start() > pos:
                self.tokens.append(("plain", self.text[pos:mt.start()]))
            if mt.group(1):
                name = mt.group(1)
                if name not in SLOTS:
                    raise ValueError("unknown slot %s in %s" % (name, tid))
                key = mt.group(2) or TOOL_SLOT_KEYS.get(tool, {}).get(name) or SLOTS[name][0]
                self.tokens.append(("slot", name, key))
            else:
                v = mt.group(5)
                val = True if v == "true" else False if v == "false" else int(v) if v.isdigit() else v
                self.tokens.append(("fixed", mt.group(3), mt.group(4), val))
            pos = mt.end()
        if pos < len(self.text):
            self.tokens.append(("plain", self.text[pos:]))
        last = self.tokens[-1]
        self.tail = last[0] == "slot" and last[1] in TAIL_SLOTS
        self.free_slots = [t[1] for t in self.tokens if t[0] == "slot" and t[1] in POOL_SLOTS]

    def render(self, ctx):
        ctx.memo = {"says_unit": any(t[0] == "slot" and t[1] == "tunit" for t in self.tokens)}
        segs = []
        for t in self.tokens:
            if t[0] == "plain":
                segs.append(seg(t[1]))
            elif t[0] == "fixed":
                segs.append(seg(t[1], (t[2], "val", t[3])))
            else:
                segs.extend(SLOTS[t[1]][1](ctx, t[2]))
        return segs


POOL_SLOTS = {"room", "tlabel", "alabel", "city", "person", "msg", "eday", "title", "music", "genre",
              "artist", "song", "dest", "sitems", "titems", "cfrom", "cto", "q", "note", "phrase",
              "lang", "food", "sitem"}


def build_templates():
    by_tool = {}
    for tool, texts in TEMPLATES.items():
        lst = [Template("%s.%02d" % (tool, i + 1), tool, t) for i, t in enumerate(texts)]
        by_tool[tool] = lst
    none = [Template("none.%02d" % (i + 1), None, t, info) for i, (t, info) in enumerate(NONE_TEMPLATES)]
    return by_tool, none


def train_only_templates():
    """{tool: [Template]} from train-templates.json (ids tool.tNN)."""
    with open(TRAIN_TEMPLATES_PATH, encoding="utf-8") as f:
        texts = json.load(f)
    return {tool: [Template("%s.t%02d" % (tool, i + 1), tool, t) for i, t in enumerate(lst)]
            for tool, lst in texts.items()}


def split_templates(lst):
    held = [t for i, t in enumerate(lst) if i % 5 == 3]
    if len(held) < 2:
        held += [t for i, t in enumerate(lst) if i % 5 == 1][:2 - len(held)]
    train = [t for t in lst if t not in held]
    return {"train": train, "heldout": held}


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------

def check_schema(value, schema, path):
    t = schema.get("type")
    if t == "string":
        if not isinstance(value, str):
            raise ValueError("%s: not a string: %r" % (path, value))
        if "minLength" in schema and len(value) < schema["minLength"]:
            raise ValueError("%s: too short" % path)
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise ValueError("%s: too long" % path)
        if "pattern" in schema and not re.search(schema["pattern"], value):
            raise ValueError("%s: %r does not match %s" % (path, value, schema["pattern"]))
    elif t == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("%s: not an integer: %r" % (path, value))
    elif t == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("%s: not a number: %r" % (path, value))
    elif t == "boolean":
        if not isinstance(value, bool):
            raise ValueError("%s: not a boolean: %r" % (path, value))
    elif t == "array":
        if not isinstance(value, list):
            raise ValueError("%s: not an array" % path)
        if "minItems" in schema and len(value) < schema["minItems"]:
            raise ValueError("%s: too few items" % path)
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ValueError("%s: too many items" % path)
        for i, v in enumerate(value):
            check_schema(v, schema.get("items", {}), "%s[%d]" % (path, i))
    elif t == "object":
        if not isinstance(value, dict):
            raise ValueError("%s: not an object" % path)
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in value:
                raise ValueError("%s: missing required %s" % (path, k))
        for k, v in value.items():
            if k not in props:
                raise ValueError("%s: unknown property %s" % (path, k))
            check_schema(v, props[k], path + "." + k)
        if list(value.keys()) != [k for k in props if k in value]:
            raise ValueError("%s: keys not in schema order" % path)
    if t in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise ValueError("%s: %r below minimum" % (path, value))
        if "maximum" in schema and value > schema["maximum"]:
            raise ValueError("%s: %r above maximum" % (path, value))
    if "enum" in schema and value not in schema["enum"]:
        raise ValueError("%s: %r not in enum" % (path, value))


def validate_example(ex, tools_by_name):
    declared = ex["tools"]
    if not (2 <= len(declared) <= 6) or len(set(declared)) != len(declared):
        raise ValueError("bad tool list %r" % declared)
    for turn in ex["turns"]:
        q = turn.get("query")
        if q is not None:
            if "  " in q or q != q.strip() or "\n" in q or not q:
                raise ValueError("bad spacing in query %r" % q)
        if "\n" in turn["reasoning"]:
            raise ValueError("newline in reasoning")
        for call in turn["calls"]:
            if call["name"] not in declared:
                raise ValueError("call to undeclared tool %s" % call["name"])
            schema = tools_by_name[call["name"]]["parameters"]
            check_schema(call["arguments"], schema, call["name"])
            for k, v in call["arguments"].items():
                ps = schema["properties"][k]
                vals = v if isinstance(v, list) else [v]
                for s in vals:
                    if isinstance(s, str) and "enum" not in ps and "pattern" not in ps:
                        if s not in q:
                            raise ValueError("%s.%s=%r not in query %r" % (call["name"], k, s, q))
    kinds = {"call": (1, 1), "multi": (2, 3), "refusal": (0, 0), "followup": (1, 1), "chatter": (0, 0)}
    lo, hi = kinds[ex["kind"]]
    n = len(ex["turns"][0]["calls"])
    if not (lo <= n <= hi):
        raise ValueError("kind %s with %d calls" % (ex["kind"], n))
    own = 2 if ex["kind"] == "followup" else 1
    if len(ex["turns"]) < own or any("query" not in t for t in ex["turns"][own:]):
        raise ValueError("bad turns of a %s example" % ex["kind"])
    if ex["kind"] == "followup" and ("result" not in ex["turns"][1] or ex["turns"][1]["calls"]):
        raise ValueError("bad followup")


# ---------------------------------------------------------------------------
# Rendering a query
# ---------------------------------------------------------------------------

def fmt_val(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return fmt_num(v)
    return str(v)


def apply_noise(rng, segs, prefixes, is_question, tail):
    """Politeness, casing, caps and punctuation, in place on the segment list.
    Returns (segments, core_start, core_end) - indices of the core request."""
    n_core = len(segs)
    pre = None
    if rng.random() < 0.30:
        pre = rng.choice(prefixes)
    suf = None
    if rng.random() < 0.15:
        suf = rng.choice(POLITE_SUF_TAIL if tail else POLITE_SUF)
    out = []
    if pre:
        out.append(seg(pre))
    out.extend(segs)
    if suf:
        out.append(seg(suf))
    core = (1 if pre else 0, (1 if pre else 0) + n_core)
    # casing
    r = rng.random()
    if r < 0.25:
        for s in out:
            s[0] = s[0].lower()
    elif r < 0.75:
        for s in out:
            if s[0]:
                s[0] = s[0][0].upper() + s[0][1:]
                break
    # occasional ALL CAPS word (never inside an argument span)
    if rng.random() < 0.06:
        cands = []
        for i, s in enumerate(out):
            if s[1] is None:
                for j, w in enumerate(s[0].split(" ")):
                    if len(w) >= 3 and w.isalpha():
                        cands.append((i, j))
        if cands:
            i, j = rng.choice(cands)
            ws = out[i][0].split(" ")
            ws[j] = ws[j].upper()
            out[i][0] = " ".join(ws)
    # punctuation
    first = "".join(s[0] for s in out).lower()
    question = is_question or (pre or "").strip().lower().startswith(("could", "can", "would"))
    if question:
        p = rng.choice(["?", "?", "?", ""])
    else:
        p = rng.choice([".", "", "", "!", ".", ""])
    if p and not first.rstrip().endswith(("?", "!", ".")):
        out.append(seg(p))
    return out, core


def segs_text(segs):
    return "".join(s[0] for s in segs)


def build_call(tool, segs):
    props = tool["parameters"]["properties"]
    args = {}
    spans = {}
    for text, bind in segs:
        if bind is None:
            continue
        key, mode, val = bind
        if key not in props:
            raise ValueError("%s has no property %s" % (tool["name"], key))
        if mode == "span":
            args[key] = text
            spans[key] = "'%s' -> %s" % (text, key)
        elif mode == "val":
            args[key] = val
            shown = fmt_val(val)
            spans[key] = ("'%s' -> %s" % (text, key)) if shown == text else ("'%s' -> %s %s" % (text, key, shown))
        else:
            args.setdefault(key, []).append(text)
    for key, v in args.items():
        if isinstance(v, list):
            spans[key] = "%s -> %s" % (", ".join("'%s'" % x for x in v), key)
    ordered = {k: args[k] for k in props if k in args}
    reason = "%s: %s" % (tool["name"], "; ".join(spans[k] for k in props if k in spans))
    return {"name": tool["name"], "arguments": ordered}, reason


# ---------------------------------------------------------------------------
# Tool results for follow-up turns
# ---------------------------------------------------------------------------

SKIES = ["sunny", "cloudy", "rain", "partly cloudy", "snow", "clear", "fog", "windy", "showers", "storms"]
ERRORS = ["device offline", "not found", "timeout", "permission denied", "service unavailable"]


def make_result(rng, call):
    name, a = call["name"], call["arguments"]
    if rng.random() < 0.08:
        return {"ok": False, "error": rng.choice(ERRORS)}, "error"
    if name == "get_weather":
        res = {"city": a["city"], "temp_c": rng.randint(-8, 36), "sky": rng.choice(SKIES)}
        if "day" in a:
            res = {"city": a["city"], "day": a["day"], "temp_c": res["temp_c"], "sky": res["sky"]}
        if rng.random() < 0.3:
            res["rain_pct"] = rng.choice(range(0, 101, 10))
        return res, "data"
    if name == "convert_units":
        f = None
        for fu, tu, fac in POOLS["unitpair"]:
            if fu == a["from_unit"].lower() and tu == a["to_unit"].lower():
                f = fac
                break
        v = a["value"]
        if f == "F2C":
            out = (v - 32) * 5 / 9
        elif f == "C2F":
            out = v * 9 / 5 + 32
        elif f is None:
            out = v
        else:
            out = v * f
        return {"value": v, "from": a["from_unit"], "to": a["to_unit"], "result": round(out, 2)}, "data"
    if name == "search_web":
        slug = re.sub(r"[^a-z0-9]+", "-", a["query"].lower()).strip("-")
        n = rng.randint(1, 3)
        return {"results": [{"title": a["query"] + (" - guide" if i else ""),
                             "url": "https://example.com/%s%s" % (slug, "-%d" % i if i else "")}
                            for i in range(n)]}, "data"
    if name == "translate_text":
        return {"ok": True, "target_language": a["target_language"], "chars": len(a["text"])}, "done"
    if name == "set_light":
        r = {"ok": True, "room": a["room"]}
        if "state" in a:
            r["state"] = a["state"]
        if "brightness" in a:
            r["brightness"] = a["brightness"]
        return (r if rng.random() < 0.5 else {"ok": True}), "done"
    if name == "set_thermostat":
        return ({"ok": True, "target": a["temperature"], "current": round(rng.uniform(14, 24), 1)}
                if rng.random() < 0.5 else {"ok": True}), "done"
    if name == "set_timer":
        return {"ok": True, "timer_id": rng.randint(1, 9), "minutes": a["minutes"]}, "done"
    if name == "set_alarm":
        return {"ok": True, "alarm_id": rng.randint(1, 20), "time": a["time"]}, "done"
    if name == "send_message":
        return {"ok": True, "delivered": rng.random() < 0.9}, "done"
    if name == "call_contact":
        return {"ok": True, "status": rng.choice(["ringing", "connected", "ringing"])}, "done"
    if name == "create_event":
        return {"ok": True, "event_id": "evt_%d" % rng.randint(100, 9999)}, "done"
    if name == "play_music":
        return {"ok": True, "now_playing": a["query"]}, "done"
    if name == "set_volume":
        return {"ok": True, "level": a["level"]}, "done"
    if name == "navigate_to":
        return {"ok": True, "eta_min": rng.randint(3, 95), "distance_km": round(rng.uniform(0.4, 80), 1)}, "done"
    if name == "add_to_list":
        return {"ok": True, "list": a["list"], "count": len(a["items"]) + rng.randint(0, 9)}, "done"
    if name == "lock_door":
        return {"ok": True, "door": a["door"], "locked": a["locked"]}, "done"
    if name == "take_note":
        return {"ok": True, "note_id": rng.randint(1, 500)}, "done"
    if name == "set_do_not_disturb":
        r = {"ok": True, "enabled": a["enabled"]}
        if "until" in a:
            r["until"] = a["until"]
        return r, "done"
    return {"ok": True}, "done"


RESULT_REASONS = {
    "done": ["result received: done", "result received: done", "result received: ok", "result received: success"],
    "data": ["result received: data returned", "result received: done", "result received: answer ready"],
    "error": ["result received: error", "result received: failed"],
}


# ---------------------------------------------------------------------------
# System text
# ---------------------------------------------------------------------------

def make_system(rng, split):
    if rng.random() >= SYSTEM_SHARE:
        return ""
    facts = []
    keys = ["date", "locale", "device", "battery", "network", "location", "user"]
    chosen = rng.sample(keys, rng.randint(1, 4))
    for k in keys:
        if k not in chosen:
            continue
        if k == "date":
            y = rng.choice([2025, 2026, 2026, 2027])
            mo = rng.randint(1, 12)
            d = rng.randint(1, 28)
            facts.append("date: %04d-%02d-%02d" % (y, mo, d))
        elif k == "locale":
            facts.append("locale: " + rng.choice(SYS_LOCALES))
        elif k == "device":
            facts.append("device: " + rng.choice(SYS_DEVICES))
        elif k == "battery":
            facts.append("battery: %d%%" % rng.randint(3, 100))
        elif k == "network":
            facts.append("network: " + rng.choice(SYS_NETWORKS))
        elif k == "location":
            facts.append("location: " + rng.choice(pool("city", split)))
        elif k == "user":
            facts.append("user: " + rng.choice([p for p in pool("person", split) if p[0].isupper()
                                                and p not in ("Mom", "Dad", "Grandma", "Grandpa")]))
    if rng.random() < 0.5:
        rng.shuffle(facts)
    return "; ".join(facts)


# ---------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------

class Generator:
    def __init__(self, tools):
        self.tools = tools
        self.by_name = {t["name"]: t for t in tools}
        self.names = [t["name"] for t in tools]
        by_tool, none = build_templates()
        missing = [n for n in self.names if n not in by_tool]
        if missing:
            raise ValueError("no templates for %s" % missing)
        self.tsplit = {n: split_templates(by_tool[n]) for n in self.names}
        for n, extra in train_only_templates().items():
            held = {t.text for t in self.tsplit[n]["heldout"]}
            leaked = [t.text for t in extra if t.text in held]
            if leaked:
                raise ValueError("train-templates.json repeats held-out templates of %s: %s" % (n, leaked))
            self.tsplit[n]["train"] += extra
        self.nsplit = split_templates(none)
        self.csplit = split_templates([Template("chat.%02d" % (i + 1), None, t)
                                       for i, t in enumerate(CHATTER_TEMPLATES)])

    def pick_tools(self, rng, needed, exclude=()):
        lo = max(2, len(needed))
        k = rng.randint(lo, 6)
        others = [n for n in self.names if n not in needed and n not in exclude]
        chosen = list(needed) + rng.sample(others, k - len(needed))
        rng.shuffle(chosen)
        return chosen

    def single(self, rng, split, tool_name, imperative_only=False, allow_tail=True):
        cands = self.tsplit[tool_name][split]
        if imperative_only:
            cands = [t for t in cands if t.imperative and (allow_tail or not t.tail)]
        if not cands:
            return None
        tpl = rng.choice(cands)
        return tpl, tpl.render(Ctx(rng, split))

    def call_turn(self, rng, tool, tpl, segs):
        """The turn of a rendered request for `tool`: noise, then its call."""
        segs, _ = apply_noise(rng, segs, tpl.prefixes, tpl.text.startswith(QUESTION_STARTS), tpl.tail)
        call, reason = build_call(self.by_name[tool], segs)
        return {"query": segs_text(segs), "reasoning": reason, "calls": [call]}

    @staticmethod
    def chatter_turn(rng, tpl, segs):
        """The turn of small talk: no request, so no call."""
        segs, core = apply_noise(rng, segs, POLITE_PRE_OTHER, tpl.text.startswith(QUESTION_STARTS), False)
        key = segs_text(segs[core[0]:core[1]]).strip()
        return {"query": segs_text(segs), "reasoning": "no request in '%s'" % key, "calls": []}

    @staticmethod
    def refusal_turn(rng, tpl, segs):
        """The turn of a rendered request that no declared tool fits."""
        segs, core = apply_noise(rng, segs, tpl.prefixes, tpl.text.startswith(QUESTION_STARTS), False)
        key = segs_text(segs[core[0]:core[1]]).strip()
        return {"query": segs_text(segs), "reasoning": "no tool for '%s'" % key, "calls": []}

    def ex_call(self, rng, split):
        tool = rng.choice(self.names)
        tpl, segs = self.single(rng, split, tool)
        turn = self.call_turn(rng, tool, tpl, segs)
        return tpl.id, self.pick_tools(rng, [tool]), [turn]

    def ex_multi(self, rng, split):
        n = 3 if rng.random() < 0.25 else 2
        for _ in range(100):
            tools = rng.sample(self.names, n)
            parts = []
            ok = True
            for i, t in enumerate(tools):
                r = self.single(rng, split, t, imperative_only=True, allow_tail=(i == n - 1))
                if r is None:
                    ok = False
                    break
                parts.append(r)
            if ok:
                break
        else:
            raise RuntimeError("cannot build multi example")
        segs = []
        bounds = []
        for i, (tpl, ps) in enumerate(parts):
            if i > 0:
                if n == 3 and i == 1:
                    segs.append(seg(rng.choice([", ", ", ", " and "])))
                else:
                    segs.append(seg(rng.choice([" and ", " and ", ", and ", " and then ", ", then ",
                                                " then ", " and also "])))
            start = len(segs)
            segs.extend(ps)
            bounds.append((start, len(segs)))
        segs, core = apply_noise(rng, segs, parts[0][0].prefixes, False, parts[-1][0].tail)
        off = core[0]
        calls, reasons = [], []
        for (tpl, _), (a, b) in zip(parts, bounds):
            call, reason = build_call(self.by_name[tpl.tool], segs[a + off:b + off])
            calls.append(call)
            reasons.append(reason)
        turn = {"query": segs_text(segs), "reasoning": " | ".join(reasons), "calls": calls}
        return "+".join(t.id for t, _ in parts), self.pick_tools(rng, tools), [turn]

    def ex_refusal(self, rng, split):
        if rng.random() < 0.5:
            # (a) a catalogue request whose tool is not declared
            tool = rng.choice(self.names)
            tpl, segs = self.single(rng, split, tool)
            exclude = [tool] + CONFLICT.get(tool, [])
            declared = self.pick_tools(rng, [], exclude)
        else:
            # (b) out-of-catalogue request
            tpl = rng.choice(self.nsplit[split])
            segs = tpl.render(Ctx(rng, split))
            declared = self.pick_tools(rng, [], ["search_web"] if tpl.info else [])
        return tpl.id, declared, [self.refusal_turn(rng, tpl, segs)]

    def ex_chatter(self, rng, split):
        tpl = rng.choice(self.csplit[split])
        return tpl.id, self.pick_tools(rng, []), [self.chatter_turn(rng, tpl, tpl.render(Ctx(rng, split)))]

    def ex_followup(self, rng, split):
        tid, declared, turns = self.ex_call(rng, split)
        res, cls = make_result(rng, turns[0]["calls"][0])
        turns.append({"result": res, "reasoning": rng.choice(RESULT_REASONS[cls]), "calls": []})
        return tid, declared, turns

    def request(self, rng, split, declared):
        """A later request of a conversation over the declared tools: a call
        to one of them, (one in eight) a request none of them fits, or (one in
        ten) small talk ("thanks, that's all")."""
        if rng.random() < CHATTER_LATER:
            tpl = rng.choice(self.csplit[split])
            return self.chatter_turn(rng, tpl, tpl.render(Ctx(rng, split)))
        if rng.random() >= 0.125:
            tool = rng.choice(declared)
            return self.call_turn(rng, tool, *self.single(rng, split, tool))
        others = [n for n in self.names
                  if n not in declared and not any(c in declared for c in CONFLICT.get(n, []))]
        return self.refusal_turn(rng, *self.single(rng, split, rng.choice(others)))

    def make(self, rng, split, n, later=0.0, shares=None):
        kinds = []
        for k, share in shares or KIND_SHARES:
            kinds += [k] * int(round(n * share))
        kinds += ["call"] * (n - len(kinds))
        kinds = kinds[:n]
        rng.shuffle(kinds)
        out = []
        for kind in kinds:
            system = make_system(rng, split)
            fn = {"call": self.ex_call, "multi": self.ex_multi, "refusal": self.ex_refusal,
                  "followup": self.ex_followup, "chatter": self.ex_chatter}[kind]
            tid, declared, turns = fn(rng, split)
            if later and rng.random() < later:
                turns += [self.request(rng, split, declared) for _ in range(rng.randint(1, 2))]
            ex = {"split": split, "template": tid, "kind": kind, "system": system,
                  "tools": declared, "turns": turns}
            validate_example(ex, self.by_name)
            out.append(ex)
        return out


def load_tools():
    with open(TOOLS_PATH, encoding="utf-8") as f:
        return json.load(f)


def generate(seed, n_train, n_heldout, synthetic=0.0, later=0.0):
    """Returns (train_examples, heldout_examples); synthetic: the share of
    invented free-text values in training examples (see SYNTHETIC); later:
    the share of training conversations that go on with one or two more
    requests over the same tools (spec section 7's new-query turn), so the
    tools block, most of every prompt, serves several trained targets."""
    global SYNTHETIC
    SYNTHETIC = synthetic
    gen = Generator(load_tools())
    train = gen.make(random.Random("train-%d" % seed), "train", n_train, later)
    held = gen.make(random.Random("heldout-%d" % seed), "heldout", n_heldout, shares=HELDOUT_SHARES)
    if n_heldout:
        held += gen.make(random.Random("chatter-%d" % seed), "heldout", HELDOUT_CHATTER,
                         shares=(("chatter", 1.0),))
    return train, held


def conversations(seed, n):
    """n held-out conversations, each going on with one or two later
    requests: how the model does past its first turn."""
    return Generator(load_tools()).make(random.Random("conversations-%d" % seed), "heldout", n, 1.0,
                                        shares=HELDOUT_SHARES)


def template_counts():
    gen = Generator(load_tools())
    out = {n: (len(gen.tsplit[n]["train"]), len(gen.tsplit[n]["heldout"])) for n in gen.names}
    out["none"] = (len(gen.nsplit["train"]), len(gen.nsplit["heldout"]))
    out["chatter"] = (len(gen.csplit["train"]), len(gen.csplit["heldout"]))
    return out


def dumps(ex):
    return json.dumps(ex, ensure_ascii=False)


def stats(examples):
    kinds, tools = {}, {}
    for ex in examples:
        kinds[ex["kind"]] = kinds.get(ex["kind"], 0) + 1
        for c in ex["turns"][0]["calls"]:
            tools[c["name"]] = tools.get(c["name"], 0) + 1
    return kinds, tools


def argument_values(x):
    """The string and number values inside a call's arguments or a tool result."""
    if isinstance(x, dict):
        for v in x.values():
            yield from argument_values(v)
    elif isinstance(x, list):
        for v in x:
            yield from argument_values(v)
    elif isinstance(x, (int, float, str)) and not isinstance(x, bool):
        yield str(x)


def split_at_values(line, values):
    """The line with every value cut out, so BPE never learns a piece that
    joins a value to the JSON or quote around it: then a value is encoded in a
    call as it is in the query, and copying it is copying tokens."""
    parts = [line]
    for v in sorted(set(values), key=len, reverse=True):
        parts = [p for part in parts for p in part.split(v)]
    return [p for p in parts if p.strip()]


def write_corpus(path):
    tools = load_tools()
    train, _ = generate(1, 60000, 0)
    compact = lambda x: json.dumps(x, separators=(",", ":"), ensure_ascii=False)
    lines = [compact(t) for t in tools]
    for ex in train:
        if ex["system"]:
            lines.append(ex["system"])
        for turn in ex["turns"]:
            if "query" in turn:
                lines.append(turn["query"])
            if "result" in turn:
                values = list(argument_values(turn["result"]))
                lines += values + split_at_values(compact(turn["result"]), values)
            values = [v for call in turn["calls"] for v in argument_values(call["arguments"])]
            lines += split_at_values(turn["reasoning"], values) + split_at_values(compact(turn["calls"]), values)
    with open(path, "w", encoding="utf-8") as f:
        for ln in lines:
            if "\n" in ln or "\r" in ln:
                raise ValueError("newline inside corpus line")
            f.write(ln + "\n")
    print("wrote %d lines to %s" % (len(lines), path))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train", type=int, default=60000)
    ap.add_argument("--heldout", type=int, default=600)
    ap.add_argument("--out", help="output directory for train.jsonl and heldout.jsonl")
    ap.add_argument("--corpus", help="write a tokenizer corpus (train split, seed 1, 60000) to this file")
    args = ap.parse_args()
    if args.corpus:
        write_corpus(args.corpus)
        return
    if not args.out:
        ap.error("--out or --corpus is required")
    train, held = generate(args.seed, args.train, args.heldout)
    os.makedirs(args.out, exist_ok=True)
    for name, exs in (("train", train), ("heldout", held)):
        with open(os.path.join(args.out, name + ".jsonl"), "w", encoding="utf-8") as f:
            for ex in exs:
                f.write(dumps(ex) + "\n")
    for name, exs in (("train", train), ("heldout", held)):
        kinds, tools = stats(exs)
        print("%s: %d examples" % (name, len(exs)))
        print("  kinds: " + ", ".join("%s=%d" % (k, kinds.get(k, 0)) for k in ("call", "multi", "refusal", "followup", "chatter")))
        print("  calls per tool: " + ", ".join("%s=%d" % (k, tools[k]) for k in sorted(tools)))
    tc = template_counts()
    print("templates (train/heldout): " + ", ".join("%s=%d/%d" % (k, a, b) for k, (a, b) in tc.items()))


if __name__ == "__main__":
    main()
